//! uvfs only: the `*at` calls with a dentry as their start ([`AtDir::Dentry`], as the FUSE
//! server names a node), [`Task::dentry_open`], and [`Cred::with_all_caps`].
//!
//! A dentry must behave exactly as an `O_PATH` descriptor of the same file (Linux: the
//! `struct path` of `vfs_*` callers such as nfsd, which is what an `O_PATH` descriptor
//! holds). Each case runs twice, on two namespaces set up alike, once with a dentry (from a
//! handle of [`Task::filp_open`]) and once with an `O_PATH` descriptor, and the results must
//! be equal; the expected values of the `posix_*` tests (checked against Linux there) apply
//! to the descriptor side. Likewise `dentry_open` must give what `openat` gives for the same
//! file after its walk.

mod common;
use common::{shape, Shape, CWD, NOAT, RO, RW, T2001, WO};
use std::fmt::Debug;
use std::sync::Arc;
use uvfs::attr::{R_OK, W_OK, X_OK};
use uvfs::open::{OpenHow, RESOLVE_BENEATH, RESOLVE_IN_ROOT};
use uvfs::stat::STATX_BASIC_STATS;
use uvfs::types::*;
use uvfs::{AtDir, AtFlags, Cred, Dentry, Errno, Fcntl, Fd, OpenFlags, RenameFlags, Task};

type R<T> = Result<T, Errno>;

const CREAT: OpenFlags = OpenFlags::CREAT;
const EMPTY: AtFlags = AtFlags::EMPTY_PATH;
const NOFOLLOW: AtFlags = AtFlags::SYMLINK_NOFOLLOW;
const O_PATH: OpenFlags = OpenFlags::PATH;
const O_NOFOLLOW: OpenFlags = OpenFlags::NOFOLLOW;
const O_DIRECTORY: OpenFlags = OpenFlags::DIRECTORY;

/// A fresh namespace (root task) holding:
/// `/d/` (0755: `f` = "data" 0644, `sub/`, `l -> f`), `/e/` (empty), `/file` = "x",
/// `/secret/` (0700: `f` 0644), `/t/` (1777: `rootf` of root), `/p` (FIFO).
fn ns() -> Task {
    let mnt = uvfs::tmpfs::mount(Default::default());
    let t = Task::init(&mnt);
    t.mkdirat(CWD, "/d", 0o755).unwrap();
    put(&t, "/d/f", b"data", 0o644);
    t.mkdirat(CWD, "/d/sub", 0o755).unwrap();
    t.symlinkat("f", CWD, "/d/l").unwrap();
    t.mkdirat(CWD, "/e", 0o755).unwrap();
    put(&t, "/file", b"x", 0o644);
    t.mkdirat(CWD, "/secret", 0o700).unwrap();
    put(&t, "/secret/f", b"s", 0o644);
    t.mkdirat(CWD, "/t", 0o777).unwrap();
    t.fchmodat(CWD, "/t", 0o1777, NOAT).unwrap();
    put(&t, "/t/rootf", b"r", 0o644);
    t.mknodat(CWD, "/p", S_IFIFO | 0o666, 0).unwrap();
    t
}

/// Creates `path` holding `data` with permission bits `mode`.
fn put(t: &Task, path: &str, data: &[u8], mode: u32) {
    let fd = t
        .openat(CWD, path, CREAT | WO | OpenFlags::TRUNC, mode)
        .unwrap();
    assert_eq!(t.write(fd, data), Ok(data.len()));
    t.fchmod(fd, mode).unwrap();
    t.close(fd).unwrap();
}

/// The shape of `lstat(path)`.
fn sh(t: &Task, path: &str) -> R<Shape> {
    t.fstatat(CWD, path, NOFOLLOW).map(shape)
}

/// The whole contents of `fd` from offset 0.
fn contents(t: &Task, fd: Fd) -> R<Vec<u8>> {
    let mut buf = [0u8; 256];
    let n = t.pread(fd, &mut buf, 0)?;
    Ok(buf[..n].to_vec())
}

/// The dentry of `path` (a symlink itself), from a handle of `filp_open`.
fn dentry_of(t: &Task, path: &str) -> Arc<Dentry> {
    let h = t.filp_open(CWD, path, O_PATH | O_NOFOLLOW, 0).unwrap();
    h.dentry().clone()
}

/// Runs `op` on a fresh [`ns`] with `at` named once by a dentry and once by an `O_PATH`
/// descriptor, asserts the two results are equal, and returns them. Both runs open the
/// descriptor, so descriptors are numbered alike.
#[track_caller]
fn both<T: PartialEq + Debug>(at: &str, op: impl Fn(&mut Task, AtDir<'_>) -> T) -> T {
    let mut t = ns();
    let d = dentry_of(&t, at);
    t.openat(CWD, at, O_PATH | O_NOFOLLOW, 0).unwrap();
    let by_dentry = op(&mut t, AtDir::Dentry(&d));
    let mut t = ns();
    let fd = t.openat(CWD, at, O_PATH | O_NOFOLLOW, 0).unwrap();
    let by_fd = op(&mut t, AtDir::Fd(fd));
    assert_eq!(
        by_dentry, by_fd,
        "{at}: a dentry (left) differs from an O_PATH descriptor (right)"
    );
    by_dentry
}

/// `both`, and the result must be `want`.
#[track_caller]
fn expect<T: PartialEq + Debug>(at: &str, want: T, op: impl Fn(&mut Task, AtDir<'_>) -> T) {
    assert_eq!(both(at, op), want, "{at}");
}

/// `(mode, nlink, uid, gid, size)` of a shape, for short expectations.
fn m(s: R<Shape>) -> R<(u32, u64, u32, u32, i64)> {
    s.map(|s| (s.mode, s.nlink, s.uid, s.gid, s.size))
}

#[test]
fn mkdirat() {
    let dir = |mode: u32| Ok((S_IFDIR | mode, 2, 0, 0, 40));
    expect("/d", (Ok(()), dir(0o755)), |t, at| {
        (t.mkdirat(at, "x", 0o755), m(sh(t, "/d/x")))
    });
    expect("/d", (Ok(()), dir(0o700)), |t, at| {
        (t.mkdirat(at, "sub/y", 0o700), m(sh(t, "/d/sub/y")))
    });
    expect("/d", Err(Errno::EEXIST), |t, at| t.mkdirat(at, "f", 0o755));
    expect("/d", Err(Errno::EEXIST), |t, at| t.mkdirat(at, ".", 0o755));
    expect("/d", Err(Errno::ENOENT), |t, at| {
        t.mkdirat(at, "no/x", 0o755)
    });
    // An absolute path ignores the start.
    expect("/d", (Ok(()), dir(0o755)), |t, at| {
        (t.mkdirat(at, "/abs", 0o755), m(sh(t, "/abs")))
    });
    // A file as the start of a relative path: ENOTDIR; an absolute one still works.
    expect("/file", Err(Errno::ENOTDIR), |t, at| {
        t.mkdirat(at, "x", 0o755)
    });
    expect("/d/l", Err(Errno::ENOTDIR), |t, at| {
        t.mkdirat(at, "x", 0o755)
    });
    expect("/file", Ok(()), |t, at| t.mkdirat(at, "/abs", 0o755));
    // An empty path is ENOENT, as for any *at call without AT_EMPTY_PATH.
    expect("/d", Err(Errno::ENOENT), |t, at| t.mkdirat(at, "", 0o755));
}

#[test]
fn openat() {
    expect("/d", Ok(b"data".to_vec()), |t, at| {
        let fd = t.openat(at, "f", RO, 0)?;
        contents(t, fd)
    });
    expect("/d", (Ok(Fd(1)), m(Ok(shape_of_new()))), |t, at| {
        (t.openat(at, "new", CREAT | RW, 0o600), m(sh(t, "/d/new")))
    });
    expect("/d", Err(Errno::EEXIST), |t, at| {
        t.openat(at, "f", CREAT | OpenFlags::EXCL | RW, 0o600)
    });
    expect("/d", Err(Errno::ENOENT), |t, at| t.openat(at, "", RO, 0));
    expect("/d", Ok(S_IFDIR | 0o755), |t, at| {
        let fd = t.openat(at, ".", RO | O_DIRECTORY, 0)?;
        t.fstat(fd).map(|s| s.st_mode)
    });
    // `..` of /d is the root.
    let root = both("/", |t, _| t.fstat(t.openat(CWD, "/", RO, 0)?).map(shape));
    expect("/d", root, |t, at| {
        t.fstat(t.openat(at, "..", RO, 0)?).map(shape)
    });
    // A symlink below the start is followed, or not.
    expect("/d", Ok(b"data".to_vec()), |t, at| {
        let fd = t.openat(at, "l", RO, 0)?;
        contents(t, fd)
    });
    expect("/d", Err(Errno::ELOOP), |t, at| {
        t.openat(at, "l", RO | O_NOFOLLOW, 0)
    });
    expect("/file", Err(Errno::ENOTDIR), |t, at| {
        t.openat(at, "x", RO, 0)
    });
    expect("/file", Err(Errno::ENOTDIR), |t, at| {
        t.openat(at, ".", RO, 0)
    });
    expect("/file", Ok(b"data".to_vec()), |t, at| {
        let fd = t.openat(at, "/d/f", RO, 0)?;
        contents(t, fd)
    });
    // O_TMPFILE in the start directory.
    expect("/d", Ok((S_IFREG | 0o600, 0)), |t, at| {
        let fd = t.openat(at, ".", OpenFlags::from_bits_retain(0o20200000) | RW, 0o600)?;
        t.fstat(fd).map(|s| (s.st_mode, s.st_nlink))
    });
}

/// The shape of a new empty file of root with mode 0600.
fn shape_of_new() -> Shape {
    Shape {
        mode: S_IFREG | 0o600,
        nlink: 1,
        uid: 0,
        gid: 0,
        size: 0,
        blocks: 0,
    }
}

#[test]
fn openat2_resolve_flags() {
    let how = |resolve| OpenHow {
        flags: RO.bits() as u64,
        mode: 0,
        resolve,
    };
    expect("/d", Ok(b"data".to_vec()), |t, at| {
        let fd = t.openat2(at, "f", &how(RESOLVE_BENEATH))?;
        contents(t, fd)
    });
    expect("/d", Err(Errno::EXDEV), |t, at| {
        t.openat2(at, "../file", &how(RESOLVE_BENEATH))
    });
    expect("/d", Err(Errno::EXDEV), |t, at| {
        t.openat2(at, "/file", &how(RESOLVE_BENEATH))
    });
    // IN_ROOT: `/` and `..` stay at the start.
    expect("/d", Ok(b"data".to_vec()), |t, at| {
        let fd = t.openat2(at, "/../f", &how(RESOLVE_IN_ROOT))?;
        contents(t, fd)
    });
    expect("/file", Err(Errno::ENOTDIR), |t, at| {
        t.openat2(at, "f", &how(RESOLVE_IN_ROOT))
    });
}

#[test]
fn fstatat_and_statx() {
    let d = Ok((S_IFDIR | 0o755, 3, 0, 0, 100));
    expect("/d", d, |t, at| m(t.fstatat(at, "", EMPTY).map(shape)));
    expect("/file", Ok((S_IFREG | 0o644, 1, 0, 0, 1)), |t, at| {
        m(t.fstatat(at, "", EMPTY).map(shape))
    });
    // The symlink itself (its O_PATH|O_NOFOLLOW descriptor names the link).
    expect("/d/l", Ok((S_IFLNK | 0o777, 1, 0, 0, 1)), |t, at| {
        m(t.fstatat(at, "", EMPTY | NOFOLLOW).map(shape))
    });
    expect("/d/l", Ok((S_IFLNK | 0o777, 1, 0, 0, 1)), |t, at| {
        m(t.fstatat(at, "", EMPTY).map(shape))
    });
    expect("/d", Err(Errno::ENOENT), |t, at| {
        t.fstatat(at, "", NOAT).map(shape)
    });
    expect("/d", Ok((S_IFREG | 0o644, 1, 0, 0, 4)), |t, at| {
        m(t.fstatat(at, "f", NOAT).map(shape))
    });
    expect("/d", Ok((S_IFREG | 0o644, 1, 0, 0, 4)), |t, at| {
        m(t.fstatat(at, "l", NOAT).map(shape))
    });
    expect("/file", Err(Errno::ENOTDIR), |t, at| {
        t.fstatat(at, "x", NOAT).map(shape)
    });
    expect("/d", Ok((S_IFDIR as u16 | 0o755, 3, 100)), |t, at| {
        t.statx(at, "", EMPTY, STATX_BASIC_STATS)
            .map(|x| (x.stx_mode, x.stx_nlink, x.stx_size))
    });
    expect("/d", Ok((S_IFREG as u16 | 0o644, 1, 4)), |t, at| {
        t.statx(at, "f", NOAT, STATX_BASIC_STATS)
            .map(|x| (x.stx_mode, x.stx_nlink, x.stx_size))
    });
    // A dentry is of the same inode as a path to it.
    expect("/d", Ok(true), |t, at| -> R<bool> {
        Ok(t.fstatat(at, "", EMPTY)?.st_ino == t.fstatat(CWD, "/d", NOAT)?.st_ino)
    });
}

#[test]
fn unlinkat() {
    expect("/d", (Ok(()), false), |t, at| {
        (t.unlinkat(at, "f", NOAT), sh(t, "/d/f").is_ok())
    });
    expect("/d", (Ok(()), false), |t, at| {
        (
            t.unlinkat(at, "sub", AtFlags::REMOVEDIR),
            sh(t, "/d/sub").is_ok(),
        )
    });
    expect("/d", Err(Errno::EISDIR), |t, at| {
        t.unlinkat(at, "sub", NOAT)
    });
    expect("/d", Err(Errno::ENOTDIR), |t, at| {
        t.unlinkat(at, "f", AtFlags::REMOVEDIR)
    });
    expect("/d", Err(Errno::ENOENT), |t, at| {
        t.unlinkat(at, "missing", NOAT)
    });
    expect("/d", Err(Errno::ENOENT), |t, at| t.unlinkat(at, "", NOAT));
    expect("/d", Err(Errno::EINVAL), |t, at| {
        t.unlinkat(at, ".", AtFlags::REMOVEDIR)
    });
    expect("/file", Err(Errno::ENOTDIR), |t, at| {
        t.unlinkat(at, "x", NOAT)
    });
    expect("/file", Ok(()), |t, at| t.unlinkat(at, "/d/f", NOAT));
}

#[test]
fn renameat2() {
    let none = RenameFlags::empty();
    expect("/d", (Ok(()), false, true), |t, at| {
        (
            t.renameat2(at, "f", at, "g", none),
            sh(t, "/d/f").is_ok(),
            sh(t, "/d/g").is_ok(),
        )
    });
    // A dentry on one side, a descriptor or the cwd on the other.
    expect("/d", (Ok(()), true), |t, at| {
        (
            t.renameat2(at, "f", CWD, "/e/g", none),
            sh(t, "/e/g").is_ok(),
        )
    });
    expect("/d", (Ok(()), true), |t, at| {
        let e = t.openat(CWD, "/e", O_PATH, 0).unwrap();
        (t.renameat2(at, "f", e, "g", none), sh(t, "/e/g").is_ok())
    });
    expect("/d", (Ok(()), true), |t, at| {
        (
            t.renameat2(CWD, "/file", at, "file", none),
            sh(t, "/d/file").is_ok(),
        )
    });
    expect("/d", Err(Errno::EISDIR), |t, at| {
        t.renameat2(at, "f", at, "sub", none)
    });
    expect("/d", Err(Errno::EEXIST), |t, at| {
        t.renameat2(at, "f", at, "l", RenameFlags::NOREPLACE)
    });
    expect("/d", (Ok(()), Ok(S_IFDIR | 0o755)), |t, at| {
        (
            t.renameat2(at, "f", at, "sub", RenameFlags::EXCHANGE),
            sh(t, "/d/f").map(|s| s.mode),
        )
    });
    expect("/d", Err(Errno::EINVAL), |t, at| {
        t.renameat(at, "sub", at, "sub/x")
    });
    expect("/d", Err(Errno::ENOENT), |t, at| {
        t.renameat(at, "nope", at, "x")
    });
    expect("/file", Err(Errno::ENOTDIR), |t, at| {
        t.renameat(CWD, "/d/f", at, "x")
    });
    expect("/file", Err(Errno::ENOTDIR), |t, at| {
        t.renameat(at, "x", CWD, "/y")
    });
}

#[test]
fn linkat() {
    // AT_EMPTY_PATH links the start itself (root holds CAP_DAC_READ_SEARCH).
    expect("/file", (Ok(()), Ok(2)), |t, at| {
        (
            t.linkat(at, "", CWD, "/d/hard", EMPTY),
            sh(t, "/d/hard").map(|s| s.nlink),
        )
    });
    expect("/file", Err(Errno::ENOENT), |t, at| {
        t.linkat(at, "", CWD, "/d/hard", NOAT)
    });
    expect("/file", Err(Errno::ENOTDIR), |t, at| {
        t.linkat(at, "", at, "x", EMPTY)
    });
    expect("/d", Err(Errno::EPERM), |t, at| {
        t.linkat(at, "", CWD, "/x", EMPTY)
    });
    expect("/d", (Ok(()), Ok(2)), |t, at| {
        (
            t.linkat(at, "f", at, "f2", NOAT),
            sh(t, "/d/f").map(|s| s.nlink),
        )
    });
    // The symlink itself, not its target.
    expect("/d/l", (Ok(()), Ok(S_IFLNK | 0o777)), |t, at| {
        (
            t.linkat(at, "", CWD, "/l2", EMPTY),
            sh(t, "/l2").map(|s| s.mode),
        )
    });
    expect("/d", Err(Errno::EEXIST), |t, at| {
        t.linkat(CWD, "/file", at, "f", NOAT)
    });
}

#[test]
fn symlink_readlink_mknod_and_attributes() {
    expect("/d", (Ok(()), Ok(b"f".to_vec())), |t, at| {
        let mut buf = [0u8; 64];
        (
            t.symlinkat("f", at, "s"),
            t.readlinkat(at, "s", &mut buf).map(|n| buf[..n].to_vec()),
        )
    });
    expect("/d/l", Ok(b"f".to_vec()), |t, at| {
        let mut buf = [0u8; 64];
        t.readlinkat(at, "", &mut buf).map(|n| buf[..n].to_vec())
    });
    let on_dir = both("/d", |t, at| t.readlinkat(at, "", &mut [0u8; 64]));
    assert!(on_dir.is_err(), "{on_dir:?}");
    expect("/d", (Ok(()), Ok(S_IFIFO | 0o644)), |t, at| {
        (
            t.mknodat(at, "p", S_IFIFO | 0o644, 0),
            sh(t, "/d/p").map(|s| s.mode),
        )
    });
    expect("/file", (Ok(()), Ok(S_IFREG | 0o600)), |t, at| {
        (
            t.fchmodat(at, "", 0o600, EMPTY),
            sh(t, "/file").map(|s| s.mode),
        )
    });
    expect("/file", (Ok(()), Ok((5, 6))), |t, at| {
        (
            t.fchownat(at, "", 5, 6, EMPTY),
            sh(t, "/file").map(|s| (s.uid, s.gid)),
        )
    });
    expect("/d", (Ok(()), Ok((5, 6))), |t, at| {
        (
            t.fchownat(at, "f", 5, 6, NOAT),
            sh(t, "/d/f").map(|s| (s.uid, s.gid)),
        )
    });
    expect("/file", (Ok(()), Ok(T2001)), |t, at| {
        (
            t.utimensat(at, "", Some(&[T2001, T2001]), EMPTY),
            t.fstatat(CWD, "/file", NOAT).map(|s| s.st_mtime),
        )
    });
    expect("/d", Ok(()), |t, at| {
        t.faccessat2(at, "f", R_OK | W_OK, NOAT)
    });
    expect("/d", Err(Errno::EACCES), |t, at| {
        t.faccessat2(at, "f", X_OK, NOAT)
    });
    expect("/file", Ok(()), |t, at| t.faccessat2(at, "", W_OK, EMPTY));
}

#[test]
fn non_root_callers_are_checked_alike() {
    fn as1000(t: &mut Task) {
        t.set_cred(Cred::new(1000, 1000, &[]));
    }
    expect("/d", Err(Errno::EACCES), |t, at| {
        as1000(t);
        t.mkdirat(at, "x", 0o755)
    });
    expect("/d", Ok(b"data".to_vec()), |t, at| {
        as1000(t);
        let fd = t.openat(at, "f", RO, 0)?;
        contents(t, fd)
    });
    expect("/d", Err(Errno::EACCES), |t, at| {
        as1000(t);
        t.openat(at, "f", WO, 0)
    });
    // Search permission on the start itself is checked by the walk.
    expect("/secret", Err(Errno::EACCES), |t, at| {
        as1000(t);
        t.openat(at, "f", RO, 0)
    });
    expect("/secret", Err(Errno::EACCES), |t, at| {
        as1000(t);
        t.fstatat(at, "f", NOAT).map(shape)
    });
    // ... but not for AT_EMPTY_PATH on a start below an unsearchable directory.
    expect("/secret/f", Ok(S_IFREG | 0o644), |t, at| {
        as1000(t);
        t.fstatat(at, "", EMPTY).map(|s| s.st_mode)
    });
    // The sticky directory: another user's file stays.
    expect("/t", Err(Errno::EPERM), |t, at| {
        as1000(t);
        t.unlinkat(at, "rootf", NOAT)
    });
    expect("/file", Err(Errno::EPERM), |t, at| {
        as1000(t);
        t.fchmodat(at, "", 0o600, EMPTY)
    });
}

/// `linkat(AT_EMPTY_PATH)` by a caller without `CAP_DAC_READ_SEARCH` needs a descriptor
/// opened with the caller's current credentials (Linux 6.10+ `LOOKUP_LINKAT_EMPTY`;
/// posix_link_rename.rs). A dentry has no opener: it counts as the caller's own (as the
/// `struct path` a kernel caller of `vfs_link` holds, which it resolved itself), so it
/// links like a descriptor the caller opened, never like one another task opened.
#[test]
fn linkat_empty_path_with_a_dentry_is_the_caller_s_own() {
    let as1000 = |t: &mut Task| t.set_cred(Cred::new(1000, 1000, &[]));
    let mut t = ns();
    // Writable by 1000, so protected_hardlinks lets it link the file.
    t.fchmodat(CWD, "/file", 0o666, NOAT).unwrap();
    let d = dentry_of(&t, "/file");
    let by_root = t.openat(CWD, "/file", O_PATH, 0).unwrap();
    as1000(&mut t);
    let own = t.openat(CWD, "/file", O_PATH, 0).unwrap();
    assert_eq!(
        t.linkat(by_root, "", CWD, "/t/a", EMPTY),
        Err(Errno::ENOENT)
    );
    assert_eq!(t.linkat(own, "", CWD, "/t/b", EMPTY), Ok(()));
    assert_eq!(t.linkat(&d, "", CWD, "/t/c", EMPTY), Ok(()));
    assert_eq!(sh(&t, "/file").map(|s| s.nlink), Ok(3));
}

#[test]
fn an_unlinked_directory_as_the_start() {
    // A directory removed while its dentry (or O_PATH descriptor) is held: creating in it
    // is ENOENT (`IS_DEADDIR`), looking things up finds nothing, stat still works.
    expect(
        "/e",
        (
            [Err(Errno::ENOENT); 6],
            Ok((S_IFDIR | 0o755, 0)),
            Err(Errno::ENOENT),
        ),
        |t, at| {
            t.unlinkat(CWD, "/e", AtFlags::REMOVEDIR).unwrap();
            let creates = [
                t.mkdirat(at, "x", 0o755),
                t.openat(at, "f", CREAT | RW, 0o644).map(drop),
                t.symlinkat("t", at, "s"),
                t.mknodat(at, "p", S_IFIFO | 0o644, 0),
                t.linkat(CWD, "/file", at, "h", NOAT),
                t.renameat(CWD, "/file", at, "r"),
            ];
            (
                creates,
                t.fstatat(at, "", EMPTY).map(|s| (s.st_mode, s.st_nlink)),
                t.fstatat(at, "f", NOAT).map(shape),
            )
        },
    );
    // Nothing was created anywhere.
    expect("/e", Ok(vec![]), |t, at| -> R<Vec<Vec<u8>>> {
        t.unlinkat(CWD, "/e", AtFlags::REMOVEDIR).unwrap();
        let _ = t.mkdirat(at, "x", 0o755);
        let fd = t.openat(CWD, "/", RO | O_DIRECTORY, 0)?;
        let mut buf = [0u8; 4096];
        let n = t.getdents64(fd, &mut buf)?;
        let names: Vec<Vec<u8>> = uvfs::parse_dirents(&buf[..n])
            .into_iter()
            .map(|e| e.name)
            .filter(|n| {
                !matches!(
                    &n[..],
                    b"." | b".." | b"d" | b"file" | b"secret" | b"t" | b"p"
                )
            })
            .collect();
        Ok(names)
    });
}

#[test]
fn an_unlinked_file_as_the_start() {
    // Linked back: ENOENT (`i_nlink == 0` without `I_LINKABLE`); stat shows nlink 0.
    expect("/file", (Err(Errno::ENOENT), Ok(0)), |t, at| {
        t.unlinkat(CWD, "/file", NOAT).unwrap();
        (
            t.linkat(at, "", CWD, "/back", EMPTY),
            t.fstatat(at, "", EMPTY).map(|s| s.st_nlink),
        )
    });
}

#[test]
fn another_namespace_is_exdev() {
    // A dentry of another tmpfs::mount, and a descriptor of a file opened there and
    // installed here, give the same answers: EXDEV for any relative or empty path (the
    // task cannot reach that tree), while an absolute path ignores the start.
    let other = uvfs::tmpfs::mount(Default::default());
    let o = Task::init(&other);
    o.mkdirat(CWD, "/od", 0o755).unwrap();
    put(&o, "/od/of", b"other", 0o644);
    let run = |by_dentry: bool| {
        let t = ns();
        let h = o.filp_open(CWD, "/od", O_PATH, 0).unwrap();
        let hf = o.filp_open(CWD, "/od/of", O_PATH, 0).unwrap();
        let (dd, fd_d) = (h.dentry().clone(), hf.dentry().clone());
        let fdir = t.install_file(h, false).unwrap();
        let ffile = t.install_file(hf, false).unwrap();
        let (at, atf): (AtDir<'_>, AtDir<'_>) = if by_dentry {
            (AtDir::Dentry(&dd), AtDir::Dentry(&fd_d))
        } else {
            (AtDir::Fd(fdir), AtDir::Fd(ffile))
        };
        (
            t.mkdirat(at, "x", 0o755),
            t.openat(at, "of", RO, 0),
            t.fstatat(at, "", EMPTY).map(shape),
            t.fstatat(atf, "", EMPTY).map(shape),
            t.unlinkat(at, "of", NOAT),
            t.renameat(CWD, "/file", at, "x"),
            t.renameat(at, "of", CWD, "/x"),
            t.linkat(atf, "", CWD, "/x", EMPTY),
            t.symlinkat("t", at, "s"),
            t.mkdirat(at, "/abs", 0o755),
            sh(&t, "/abs").is_ok(),
            o.fstatat(CWD, "/od/of", NOAT).is_ok(),
        )
    };
    let x = Err(Errno::EXDEV);
    let want = (
        x,
        Err(Errno::EXDEV),
        Err(Errno::EXDEV),
        Err(Errno::EXDEV),
        x,
        x,
        x,
        x,
        x,
        Ok(()),
        true,
        true,
    );
    assert_eq!(run(false), want, "a descriptor of another namespace");
    assert_eq!(run(true), want, "a dentry of another namespace");
    // dentry_open of it too.
    let t = ns();
    let d = o
        .filp_open(CWD, "/od/of", O_PATH, 0)
        .unwrap()
        .dentry()
        .clone();
    assert_eq!(t.dentry_open(&d, RO).err(), Some(Errno::EXDEV));
    assert_eq!(t.dentry_open(&d, O_PATH).err(), Some(Errno::EXDEV));
}

/// What a descriptor opened with some flags shows: `F_GETFL`, a read, a write, the size
/// after them, and `fstat`'s mode.
type Opened = R<(i32, R<usize>, R<usize>, R<i64>, u32)>;

fn probe(t: &Task, fd: Fd) -> Opened {
    let fl = t.fcntl(fd, Fcntl::GetFl)?;
    let r = t.pread(fd, &mut [0u8; 16], 0);
    let w = t.write(fd, b"w");
    let size = t.fstat(fd).map(|s| s.st_size);
    Ok((fl, r, w, size, t.fstat(fd)?.st_mode))
}

/// `dentry_open(dentry of path, flags)` and `openat(path, flags)` (with `O_NOFOLLOW` for a
/// symlink, which the dentry names itself) on two fresh namespaces, as root or as uid
/// 1000 (the dentry is taken as root first): both results.
fn open_both(path: &str, flags: OpenFlags, uid: u32) -> (Opened, Opened) {
    let cred = |t: &mut Task| {
        if uid != 0 {
            t.set_cred(Cred::new(uid, uid, &[]));
        }
    };
    let mut t = ns();
    t.mkdirat(CWD, "/w", 0o777).unwrap();
    put(&t, "/w/r600", b"secret", 0o600);
    put(&t, "/w/r644", b"public", 0o644);
    let d = dentry_of(&t, path);
    cred(&mut t);
    let a = t
        .dentry_open(&d, flags)
        .and_then(|h| t.install_file(h, false))
        .and_then(|fd| probe(&t, fd));
    let mut t = ns();
    t.mkdirat(CWD, "/w", 0o777).unwrap();
    put(&t, "/w/r600", b"secret", 0o600);
    put(&t, "/w/r644", b"public", 0o644);
    cred(&mut t);
    let nofollow = if path == "/d/l" {
        O_NOFOLLOW
    } else {
        OpenFlags::empty()
    };
    let b = t
        .openat(CWD, path, flags | nofollow, 0)
        .and_then(|fd| probe(&t, fd))
        // O_NOFOLLOW shows in F_GETFL; the dentry side was not given it.
        .map(|(fl, r, w, s, m)| (fl & !(O_NOFOLLOW.bits() as i32), r, w, s, m));
    (a, b)
}

#[test]
fn dentry_open_matches_openat() {
    let trunc = OpenFlags::TRUNC;
    let cases: &[(&str, OpenFlags, Result<(), Errno>)] = &[
        ("/d/f", RO, Ok(())),
        ("/d/f", WO, Ok(())),
        ("/d/f", RW, Ok(())),
        ("/d/f", RW | OpenFlags::APPEND, Ok(())),
        ("/d/f", RW | OpenFlags::NONBLOCK, Ok(())),
        ("/d/f", OpenFlags::from_bits_retain(3), Ok(())),
        ("/d/f", WO | trunc, Ok(())),
        ("/d/f", RO | trunc, Ok(())),
        ("/d/f", RO | OpenFlags::NOATIME, Ok(())),
        ("/d/f", RO | OpenFlags::CLOEXEC, Ok(())),
        ("/d/f", RO | O_DIRECTORY, Err(Errno::ENOTDIR)),
        ("/d/f", O_PATH, Ok(())),
        ("/d", RO, Ok(())),
        ("/d", RO | O_DIRECTORY, Ok(())),
        ("/d", WO, Err(Errno::EISDIR)),
        ("/d", RW, Err(Errno::EISDIR)),
        ("/d", RO | trunc, Err(Errno::EISDIR)),
        ("/d", O_PATH | O_DIRECTORY, Ok(())),
        ("/d/l", RO, Err(Errno::ELOOP)),
        ("/d/l", WO, Err(Errno::ELOOP)),
        ("/d/l", O_PATH, Ok(())),
        ("/p", RO, Err(Errno::EOPNOTSUPP)),
        ("/p", WO | OpenFlags::NONBLOCK, Err(Errno::ENXIO)),
        ("/p", O_PATH, Ok(())),
    ];
    for &(path, flags, want) in cases {
        let (a, b) = open_both(path, flags, 0);
        assert_eq!(
            a, b,
            "{path} {flags:?}: dentry_open (left) differs from openat (right)"
        );
        assert_eq!(a.map(drop), want, "{path} {flags:?}");
    }
    // O_TRUNC truncated.
    assert_eq!(open_both("/d/f", RO | trunc, 0).0.map(|p| p.3), Ok(Ok(0)));
}

/// Bug: `dentry_open` with `O_PATH | O_DIRECTORY` on a file (or a symlink) gave a
/// descriptor, where `openat` on the same file gives `ENOTDIR` (its doc promises
/// `openat`'s errors after the walk, `ENOTDIR` for `O_DIRECTORY` among them). Cause: the
/// `O_PATH` branch of `dentry_open` went straight to `File::open_handle`, and only
/// `do_open` checked `O_DIRECTORY`. Fix: check it in the `O_PATH` branch too (open.rs).
#[test]
fn regression_dentry_open_o_path_o_directory_on_a_file_is_enotdir() {
    for path in ["/d/f", "/d/l", "/p"] {
        let (a, b) = open_both(path, O_PATH | O_DIRECTORY, 0);
        assert_eq!(
            a, b,
            "{path}: dentry_open (left) differs from openat (right)"
        );
        assert_eq!(a, Err(Errno::ENOTDIR), "{path}");
    }
}

#[test]
fn dentry_open_refuses_creating_flags() {
    let t = ns();
    let d = dentry_of(&t, "/d/f");
    let dir = dentry_of(&t, "/d");
    let tmpfile = OpenFlags::from_bits_retain(0o20000000) | O_DIRECTORY;
    for (dd, flags) in [
        (&d, CREAT | RW),
        (&d, OpenFlags::EXCL | RW),
        (&d, CREAT | OpenFlags::EXCL | RW),
        (&dir, tmpfile | RW),
        (&dir, CREAT | O_DIRECTORY),
    ] {
        assert_eq!(
            t.dentry_open(dd, flags).err(),
            Some(Errno::EINVAL),
            "{flags:?}"
        );
    }
    // Nothing changed.
    assert_eq!(sh(&t, "/d/f").map(|s| s.size), Ok(4));
    // With O_PATH, openat drops every other flag but O_DIRECTORY and O_NOFOLLOW
    // (`build_open_how`): dentry_open too.
    assert!(t.dentry_open(&dir, tmpfile | O_PATH).is_ok());
    assert!(t.dentry_open(&d, CREAT | OpenFlags::EXCL | O_PATH).is_ok());
}

#[test]
fn dentry_open_checks_the_file_s_permission_like_openat() {
    let cases: &[(&str, OpenFlags, Result<(), Errno>)] = &[
        ("/w/r600", RO, Err(Errno::EACCES)),
        ("/w/r600", WO, Err(Errno::EACCES)),
        ("/w/r600", O_PATH, Ok(())),
        ("/w/r644", RO, Ok(())),
        ("/w/r644", WO, Err(Errno::EACCES)),
        ("/w/r644", RW, Err(Errno::EACCES)),
        ("/w/r644", RO | OpenFlags::TRUNC, Err(Errno::EACCES)),
        ("/w/r644", RO | OpenFlags::NOATIME, Err(Errno::EPERM)),
        ("/d", RO, Ok(())),
        ("/secret", RO, Err(Errno::EACCES)),
    ];
    for &(path, flags, want) in cases {
        let (a, b) = open_both(path, flags, 1000);
        assert_eq!(
            a, b,
            "{path} {flags:?}: dentry_open (left) differs from openat (right)"
        );
        assert_eq!(a.map(drop), want, "{path} {flags:?}");
    }
}

/// `dentry_open` has no walk, so search permission on the directories above the file is not
/// checked (Linux's `dentry_open` likewise: its caller resolved the path): uid 1000 opens
/// `/secret/f` (0644 below a 0700 directory of root) through a dentry, while `openat` of
/// the path is `EACCES`.
#[test]
fn dentry_open_checks_no_search_permission() {
    let mut t = ns();
    let d = dentry_of(&t, "/secret/f");
    t.set_cred(Cred::new(1000, 1000, &[]));
    assert_eq!(t.openat(CWD, "/secret/f", RO, 0), Err(Errno::EACCES));
    let fd = t.dentry_open(&d, RO).and_then(|h| t.install_file(h, false));
    assert_eq!(fd.and_then(|fd| contents(&t, fd)), Ok(b"s".to_vec()));
}

#[test]
fn dentry_open_o_path_names_the_file() {
    // An O_PATH handle from dentry_open: fstat and *at calls work, I/O is EBADF; F_GETFL
    // shows O_PATH.
    let t = ns();
    let d = dentry_of(&t, "/d");
    let fd = t
        .install_file(t.dentry_open(&d, O_PATH).unwrap(), false)
        .unwrap();
    assert_eq!(t.fcntl(fd, Fcntl::GetFl), Ok(O_PATH.bits() as i32));
    assert_eq!(t.read(fd, &mut [0u8; 4]), Err(Errno::EBADF));
    assert_eq!(t.getdents64(fd, &mut [0u8; 512]), Err(Errno::EBADF));
    assert_eq!(t.fstat(fd).map(|s| s.st_mode), Ok(S_IFDIR | 0o755));
    let f = t.openat(fd, "f", RO, 0).unwrap();
    assert_eq!(contents(&t, f), Ok(b"data".to_vec()));
    // O_CLOEXEC is not kept in the file's flags.
    let h = t.dentry_open(&d, O_PATH | OpenFlags::CLOEXEC).unwrap();
    assert_eq!(h.flags(), O_PATH);
}

#[test]
fn all_caps_owns_as_the_caller_and_passes_checks_as_root() {
    // uid 1000 with root's capabilities (the FUSE server with default_permissions): what
    // it creates is 1000's, and it passes the checks uid 1000 alone fails.
    let mnt = uvfs::tmpfs::mount(Default::default());
    let root = Task::init(&mnt);
    root.mkdirat(CWD, "/r", 0o755).unwrap();
    put(&root, "/r/secret", b"s", 0o600);
    put(&root, "/r/suid", b"", 0o4757);
    root.mkdirat(CWD, "/t", 0o777).unwrap();
    root.fchmodat(CWD, "/t", 0o1777, NOAT).unwrap();
    put(&root, "/t/rootf", b"r", 0o644);

    let plain = Task::with_cred(&mnt, Cred::new(1000, 1000, &[]));
    let caps = Task::with_cred(&mnt, Cred::new(1000, 1000, &[]).with_all_caps());
    assert!(caps.cred().is_root());
    assert!(!plain.cred().is_root());
    assert_eq!((caps.getuid(), caps.getgid()), (1000, 1000));

    type Row = (R<Fd>, R<()>, R<Vec<u8>>, R<()>, R<()>, R<()>, R<()>, R<()>);
    let run = |t: &Task, n: &str| -> Row {
        (
            t.openat(CWD, format!("/r/new{n}"), CREAT | RW, 0o644),
            t.mkdirat(CWD, format!("/r/dir{n}"), 0o755),
            t.openat(CWD, "/r/secret", RO, 0)
                .and_then(|fd| contents(t, fd)),
            t.fchownat(CWD, "/r/secret", 2000, 2000, NOAT),
            t.fchmodat(CWD, "/r/secret", 0o640, NOAT),
            t.faccessat2(CWD, "/r/secret", R_OK | W_OK, NOAT),
            t.utimensat(CWD, "/r/secret", Some(&[T2001, T2001]), NOAT),
            t.openat(CWD, "/r/secret", RO | OpenFlags::NOATIME, 0)
                .map(drop),
        )
    };
    let (e, p) = (Err(Errno::EACCES), Err(Errno::EPERM));
    assert_eq!(
        run(&plain, "p"),
        (Err(Errno::EACCES), e, Err(Errno::EACCES), p, p, e, p, e)
    );
    // All but access(2), which drops the capabilities of a real uid other than 0
    // (access_override_creds; checked with them below under AT_EACCESS).
    assert_eq!(
        run(&caps, "c"),
        (
            Ok(Fd(0)),
            Ok(()),
            Ok(b"s".to_vec()),
            Ok(()),
            Ok(()),
            e,
            Ok(()),
            Ok(())
        )
    );
    // Owned by the caller's ids, not root's.
    for p in ["/r/newc", "/r/dirc"] {
        let st = root.fstatat(CWD, p, NOAT).unwrap();
        assert_eq!((st.st_uid, st.st_gid), (1000, 1000), "{p}");
    }
    // Execute still needs an x bit, even for root.
    assert_eq!(
        caps.faccessat2(CWD, "/t/rootf", X_OK, NOAT),
        Err(Errno::EACCES)
    );
    // The sticky directory lets it remove root's file (CAP_FOWNER).
    assert_eq!(plain.unlinkat(CWD, "/t/rootf", NOAT), Err(Errno::EPERM));
    assert_eq!(caps.unlinkat(CWD, "/t/rootf", NOAT), Ok(()));
    // A write keeps set-user-ID (CAP_FSETID); uid 1000 alone drops it.
    let w = |t: &Task| {
        let fd = t.openat(CWD, "/r/suid", WO, 0).unwrap();
        t.write(fd, b"x").unwrap();
        root.fstatat(CWD, "/r/suid", NOAT).unwrap().st_mode
    };
    assert_eq!(w(&caps), S_IFREG | 0o4757);
    assert_eq!(w(&plain), S_IFREG | 0o757);
    // linkat(AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH.
    let fd = caps.openat(CWD, "/r/newc", RO, 0).unwrap();
    assert_eq!(caps.linkat(fd, "", CWD, "/r/hard", EMPTY), Ok(()));
    // access(2) without AT_EACCESS drops them for a real uid other than 0
    // (access_override_creds); AT_EACCESS checks with them.
    assert_eq!(
        caps.faccessat2(CWD, "/r/secret", R_OK, NOAT),
        Err(Errno::EACCES)
    );
    assert_eq!(
        caps.faccessat2(CWD, "/r/secret", R_OK, AtFlags::EACCESS),
        Ok(())
    );
    // Capabilities pass fork on.
    assert!(caps.fork().cred().is_root());
}

/// Bug (issue 15 item 8): the FUSE server's exec open also checked read permission, so a
/// 0711 program could not be run by users who may not read it. `dentry_open_exec` checks
/// execute permission alone, as Linux's `do_open_execat` (`acc_mode = MAY_EXEC`), and opens
/// only regular files; the file it gives is readable (the kernel reads the program).
#[test]
fn dentry_open_exec_checks_execute_alone() {
    let mut t = ns();
    put(&t, "/x711", b"prog", 0o711);
    put(&t, "/x644", b"data", 0o644);
    let (x711, x644) = (dentry_of(&t, "/x711"), dentry_of(&t, "/x644"));
    let (dir, fifo, link) = (
        dentry_of(&t, "/d"),
        dentry_of(&t, "/p"),
        dentry_of(&t, "/d/l"),
    );
    t.set_cred(Cred::new(1000, 1000, &[]));
    assert_eq!(
        t.dentry_open(&x711, RO).err(),
        Some(Errno::EACCES),
        "not readable"
    );
    let fd = t
        .dentry_open_exec(&x711)
        .and_then(|h| t.install_file(h, false))
        .unwrap();
    assert_eq!(contents(&t, fd), Ok(b"prog".to_vec()));
    assert_eq!(t.write(fd, b"w"), Err(Errno::EBADF), "read-only");
    let err = |d: &Arc<Dentry>| t.dentry_open_exec(d).err();
    assert_eq!(err(&x644), Some(Errno::EACCES), "no execute bit");
    assert_eq!(err(&dir), Some(Errno::EACCES), "a directory");
    assert_eq!(err(&fifo), Some(Errno::EACCES), "a FIFO");
    assert_eq!(err(&link), Some(Errno::ELOOP), "a symlink");
}

/// Issue 15 item 9: `fs.protected_hardlinks` is a setting of the namespace (the FUSE mount
/// takes the host's), not always on: off, a user who may write the new parent links any
/// file but a directory, as Linux with the sysctl at 0.
#[test]
fn protected_hardlinks_is_a_namespace_setting() {
    let mnt = uvfs::tmpfs::mount(Default::default());
    let mut t = Task::init(&mnt);
    t.mkdirat(CWD, "/d", 0o755).unwrap();
    t.mkdirat(CWD, "/t", 0o777).unwrap();
    t.fchmodat(CWD, "/t", 0o1777, NOAT).unwrap();
    put(&t, "/t/secret", b"s", 0o600);
    t.set_cred(Cred::new(1000, 1000, &[]));
    let ln = |t: &Task, to: &str| t.linkat(CWD, "/t/secret", CWD, to, NOAT);
    assert!(mnt.protected_hardlinks(), "on by default");
    assert_eq!(ln(&t, "/t/a"), Err(Errno::EPERM));
    mnt.set_protected_hardlinks(false);
    assert_eq!(ln(&t, "/t/a"), Ok(()));
    assert_eq!(
        t.linkat(CWD, "/d", CWD, "/t/dir", NOAT),
        Err(Errno::EPERM),
        "a directory"
    );
    mnt.set_protected_hardlinks(true);
    assert_eq!(ln(&t, "/t/b"), Err(Errno::EPERM));
}

/// The `*xattrat` calls (Linux 6.13's `getxattrat` family), which the FUSE server uses on a
/// node: relative to a dentry as to an `O_PATH` descriptor; an empty path with
/// `AT_EMPTY_PATH` is the dentry itself, but `EBADF` for an `O_PATH` descriptor and for
/// `AT_FDCWD` (Linux's `fdget`); other flags `EINVAL` before anything else.
#[test]
fn xattrat_on_dentries() {
    let name = "user.a";
    expect("/d", Ok((1, b"v".to_vec(), 7)), |t, at| {
        t.setxattrat(at, "f", NOAT, name, b"v", 0)?;
        let mut buf = [0; 8];
        let n = t.getxattrat(at, "l", NOAT, name, &mut buf)?;
        let listed = t.listxattrat(at, "f", NOAT, &mut [0; 64])?;
        t.removexattrat(at, "f", NOAT, name)?;
        Ok::<_, Errno>((n, buf[..n].to_vec(), listed))
    });
    expect("/d", Err(Errno::ENODATA), |t, at| {
        t.getxattrat(at, "l", NOFOLLOW, "trusted.none", &mut [])
    });
    expect("/d", Err(Errno::EINVAL), |t, at| {
        t.getxattrat(at, "nonexistent", AtFlags::REMOVEDIR, name, &mut [])
    });
    expect("/d", Err(Errno::ENOENT), |t, at| {
        t.getxattrat(at, "", NOAT, name, &mut [])
    });
    let t = ns();
    let f = dentry_of(&t, "/d/f");
    assert_eq!(t.setxattrat(&f, "", EMPTY, name, b"w", 0), Ok(()));
    assert_eq!(t.getxattr("/d/f", name, &mut [0; 8]), Ok(1));
    assert_eq!(t.getxattrat(&f, "", EMPTY, name, &mut []), Ok(1));
    assert_eq!(t.listxattrat(&f, "", EMPTY, &mut []), Ok(7));
    assert_eq!(t.removexattrat(&f, "", EMPTY, name), Ok(()));
    assert_eq!(t.getxattr("/d/f", name, &mut [0; 8]), Err(Errno::ENODATA));
    // A symlink's own dentry: `user.*` is not for symlinks.
    let l = dentry_of(&t, "/d/l");
    assert_eq!(
        t.setxattrat(&l, "", EMPTY | NOFOLLOW, name, b"w", 0),
        Err(Errno::EPERM)
    );
    let fd = t.openat(CWD, "/d/f", O_PATH, 0).unwrap();
    assert_eq!(
        t.getxattrat(fd, "", EMPTY, name, &mut []),
        Err(Errno::EBADF)
    );
    assert_eq!(
        t.getxattrat(CWD, "", EMPTY, name, &mut []),
        Err(Errno::EBADF)
    );
}
