//! The mount tree: `mount(2)` (new file systems, binds, per-mount flags), `umount2(2)`
//! (`EBUSY`, lazy detach, `MNT_EXPIRE`), `..` across mount roots and at a chroot's root,
//! stat of a mount point, `EXDEV` (rename, link, `RESOLVE_NO_XDEV`), `EBUSY` for mount
//! points, read-only mounts (`EROFS`), `noexec`/`nodev`, `statfs`'s `f_flags`, `stx_mnt_id`
//! and the mount table, asserted against Linux (each case also runs on the host kernel, in
//! the sandbox thread's private mount namespace, see `common`).
//!
//! On uvfs, [`Sys::mount_new`] mounts a file system of the kind under test (a tmpfs on
//! tmpfs, a hostfs over a fresh host tmpfs on hostfs); Linux's is a tmpfs.

mod common;
use common::*;
use uvfs::attr::{R_OK, W_OK, X_OK};
use uvfs::open::{OpenHow, RESOLVE_NO_XDEV};
use uvfs::stat::{STATX_BASIC_STATS, STATX_MNT_ID};
use uvfs::statfs::{ST_RELATIME, ST_VALID};
use uvfs::types::*;
use uvfs::{AtFlags, Errno, Fd, OpenFlags, RenameFlags, Stat};

const NONE: MountFlags = MountFlags::empty();
const RDONLY: MountFlags = MountFlags::RDONLY;
const REC: MountFlags = MountFlags::REC;
const NOUM: UmountFlags = UmountFlags::empty();
const DETACH: UmountFlags = UmountFlags::DETACH;
const DIR: OpenFlags = OpenFlags::DIRECTORY;
const PATH: OpenFlags = OpenFlags::PATH;
const RMDIR: AtFlags = AtFlags::REMOVEDIR;

/// `statfs`'s `ST_RDONLY`, `ST_NOSUID`, `ST_NODEV`, `ST_NOEXEC`.
const ST_RDONLY: i64 = 1;
const ST_NOSUID: i64 = 2;
const ST_NODEV: i64 = 4;
const ST_NOEXEC: i64 = 8;
/// The `f_flags` of a mount with no per-mount flags.
const ST_BASE: i64 = ST_VALID | ST_RELATIME;

/// The mount tests' tree: [`posix_tree`] (whose `/d/f` = "data" and empty `/d/sub/` serve
/// as a file and a directory outside any mount), plus `/m/` (`hidden` = "h") with a new
/// file system mounted on it holding `f` = "in", `sub/` (`g` = "g"). A variant because
/// these cases need a mount in the tree they start from (`hidden` is what it covers).
fn mount_tree(s: &dyn Sys) {
    posix_tree(s);
    s.mkdir(b"/m");
    s.mkfile(b"/m/hidden", b"h");
    mount(s, b"/m");
    s.mkfile(b"/m/f", b"in");
    s.mkdir(b"/m/sub");
    s.mkfile(b"/m/sub/g", b"g");
}

/// Mounts a new file system at `path`, panicking on failure.
#[track_caller]
fn mount(s: &dyn Sys, path: &[u8]) {
    s.mount_new(path, NONE)
        .unwrap_or_else(|e| panic!("{}: mount at {:?}: {e:?}", s.kind(), show(path)));
}

/// Binds `src` onto `dst`, panicking on failure.
#[track_caller]
fn bind(s: &dyn Sys, src: &[u8], dst: &[u8], flags: MountFlags) {
    s.mount_bind(src, dst, flags).unwrap_or_else(|e| {
        panic!(
            "{}: bind {:?} on {:?}: {e:?}",
            s.kind(),
            show(src),
            show(dst)
        )
    });
}

/// `(st_dev, st_ino)` of `path`.
fn id(s: &dyn Sys, path: &[u8]) -> Result<(u64, u64), Errno> {
    s.stat(path).map(|st| (st.st_dev, st.st_ino))
}

/// Owned names, for comparing with [`Sys::ls`]'s.
fn sv(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

fn fid(st: Stat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}

/// The contents of `path` as a string.
fn cat(s: &dyn Sys, path: &[u8]) -> Result<String, Errno> {
    s.read_file(path).map(|v| String::from_utf8(v).unwrap())
}

fn open2(s: &dyn Sys, dirfd: Fd, path: &[u8], resolve: u64) -> Result<(), Errno> {
    let how = OpenHow {
        flags: PATH.bits() as u64,
        mode: 0,
        resolve,
    };
    s.openat2(dirfd, path, &how).map(|fd| s.close(fd).unwrap())
}

fn mnt_id(s: &dyn Sys, path: &[u8]) -> u64 {
    s.statx(CWD, path, NOAT, STATX_BASIC_STATS | STATX_MNT_ID)
        .unwrap()
        .stx_mnt_id
}

type R = Result<(), Errno>;

// ---------------------------------------------------------------------------------------
// Walking across mounts

#[test]
fn walk_into_a_mount_and_back_with_dotdot() {
    expect(
        ok((
            (true, true, true, true),
            ("in".to_string(), "data".to_string()),
            (b"/m/sub".to_vec(), b"/".to_vec(), true),
            sv(&["f", "sub"]),
        )),
        |s| {
            mount_tree(s);
            let root = id(s, b"/")?;
            let m = id(s, b"/m")?;
            let ids = (
                m.0 != root.0,
                id(s, b"/m/sub/..")? == m,
                id(s, b"/m/..")? == root,
                id(s, b"/m/sub/../..")? == root,
            );
            let reads = (cat(s, b"/m/sub/../f")?, cat(s, b"/m/../d/f")?);
            s.chdir(b"/m/sub")?;
            let inside = s.getcwd()?;
            s.chdir(b"../..")?;
            let back = s.getcwd()?;
            let fd = s.open(b"/m", DIR, 0)?;
            let up = s.openat(fd, b"..", DIR, 0)?;
            let at = fid(s.fstat(up)?) == root;
            Ok((ids, reads, (inside, back, at), s.ls(b"/m")?))
        },
    );
}

#[test]
fn dotdot_clamps_at_a_chroot_root() {
    // Root at a mount's root: `..` stays in it, never reaching the mount point's parent.
    expect(
        ok((
            true,
            true,
            "in".to_string(),
            sv(&["f", "sub"]),
            b"/".to_vec(),
        )),
        |s| {
            mount_tree(s);
            s.chroot(b"/m")?;
            s.chdir(b"/")?;
            let r = id(s, b"/")?;
            let a = id(s, b"/..")? == r;
            let b = id(s, b"/sub/../../..")? == r;
            let f = cat(s, b"/../../f")?;
            s.chdir(b"..")?;
            Ok((a, b, f, s.ls(b"..")?, s.getcwd()?))
        },
    );
    // Root at a directory inside a mount.
    expect(ok((true, sv(&["g"]))), |s| {
        mount_tree(s);
        s.chroot(b"/m/sub")?;
        Ok((id(s, b"/..")? == id(s, b"/")?, s.ls(b"/../..")?))
    });
    // Root above a mount: `..` out of the mount goes to the mount point's parent, then
    // clamps.
    expect(ok((true, true, sv(&["f", "mm", "sub"]))), |s| {
        mount_tree(s);
        s.mkdir(b"/d/mm");
        mount(s, b"/d/mm");
        s.chroot(b"/d")?;
        let r = id(s, b"/")?;
        Ok((
            id(s, b"/mm/..")? == r,
            id(s, b"/mm/../..")? == r,
            s.ls(b"/mm/../../..")?,
        ))
    });
}

#[test]
fn stat_of_a_mount_point_is_the_mounted_root() {
    // Before: the directory; mounted: the new root (another st_dev, the root's inode, also
    // for lstat and from the parent's descriptor); after umount: the directory again.
    expect(
        ok(((true, true, true, true, true), sv(&["hidden"]), true)),
        |s| {
            s.mkdir(b"/m");
            s.mkfile(b"/m/hidden", b"h");
            let before = id(s, b"/m")?;
            mount(s, b"/m");
            s.mkfile(b"/m/f", b"");
            let st = id(s, b"/m")?;
            let rootfd = s.open(b"/", DIR, 0)?;
            let by_fd = fid(s.fstatat(rootfd, b"m", NOAT)?);
            let l = fid(s.lstat(b"/m")?);
            let mounted = (
                st.0 != before.0,
                st == id(s, b"/m/.")?,
                id(s, b"/m/f")?.0 == st.0,
                l == st,
                by_fd == st,
            );
            s.umount2(b"/m", NOUM)?;
            Ok((mounted, s.ls(b"/m")?, id(s, b"/m")? == before))
        },
    );
    // The mounted root's attributes are the new file system's root's.
    let _shape = same(|s| {
        s.mkdir(b"/m");
        s.fchmodat(CWD, b"/m", 0o700, NOAT).unwrap();
        mount(s, b"/m");
        s.mkdir(b"/m/a");
        s.shape_of(b"/m")
    });
}

/// A descriptor of a directory opened before something was mounted on it still names the
/// covered directory: its entries, `.` is itself, and `..` then the name crosses into the
/// mount.
#[test]
fn a_descriptor_of_the_covered_directory() {
    expect(ok(("h".to_string(), true, true, sv(&["f"]))), |s| {
        s.mkdir(b"/m");
        s.mkfile(b"/m/hidden", b"h");
        let fd = s.open(b"/m", DIR, 0)?;
        let under = fid(s.fstat(fd)?);
        mount(s, b"/m");
        s.mkfile(b"/m/f", b"");
        let f = s.openat(fd, b"hidden", RO, 0)?;
        let h = String::from_utf8(s.read_to_end(f)?).unwrap();
        Ok((
            h,
            fid(s.fstatat(fd, b".", NOAT)?) == under,
            fid(s.fstatat(fd, b"../m", NOAT)?) == id(s, b"/m")?,
            s.ls(b"/m")?,
        ))
    });
}

/// A second mount on a mount point covers the first; unmounting it shows the first again.
#[test]
fn stacked_mounts() {
    expect(ok((sv(&["two"]), sv(&["one"]), true, sv(&[]))), |s| {
        s.mkdir(b"/m");
        mount(s, b"/m");
        s.mkfile(b"/m/one", b"");
        let first = id(s, b"/m")?;
        mount(s, b"/m");
        s.mkfile(b"/m/two", b"");
        let top = s.ls(b"/m")?;
        s.umount2(b"/m", NOUM)?;
        let again = (s.ls(b"/m")?, id(s, b"/m")? == first);
        s.umount2(b"/m", NOUM)?;
        Ok((top, again.0, again.1, s.ls(b"/m")?))
    });
}

// ---------------------------------------------------------------------------------------
// EXDEV

#[test]
fn rename_and_link_across_mounts_is_exdev() {
    table::<R>(&[
        ("rename out of a mount", Err(Errno::EXDEV), |s| {
            mount_tree(s);
            s.renameat(CWD, b"/m/f", CWD, b"/f2")
        }),
        ("rename into a mount", Err(Errno::EXDEV), |s| {
            mount_tree(s);
            s.renameat(CWD, b"/d/f", CWD, b"/m/x")
        }),
        ("rename into a mount over a file", Err(Errno::EXDEV), |s| {
            mount_tree(s);
            s.renameat(CWD, b"/d/f", CWD, b"/m/f")
        }),
        ("RENAME_EXCHANGE across", Err(Errno::EXDEV), |s| {
            mount_tree(s);
            s.renameat2(CWD, b"/d/f", CWD, b"/m/f", RenameFlags::EXCHANGE)
        }),
        ("rename inside a mount", Ok(()), |s| {
            mount_tree(s);
            s.renameat(CWD, b"/m/f", CWD, b"/m/sub/f")
        }),
        ("link out of a mount", Err(Errno::EXDEV), |s| {
            mount_tree(s);
            s.linkat(CWD, b"/m/f", CWD, b"/f2", NOAT)
        }),
        ("link into a mount", Err(Errno::EXDEV), |s| {
            mount_tree(s);
            s.linkat(CWD, b"/d/f", CWD, b"/m/x", NOAT)
        }),
        ("link inside a mount", Ok(()), |s| {
            mount_tree(s);
            s.linkat(CWD, b"/m/f", CWD, b"/m/sub/f", NOAT)
        }),
        (
            "rename between two binds of one fs",
            Err(Errno::EXDEV),
            |s| {
                mount_tree(s);
                bind(s, b"/m/sub", b"/d/sub", NONE);
                s.renameat(CWD, b"/m/f", CWD, b"/d/sub/f")
            },
        ),
        ("link between two binds of one fs", Err(Errno::EXDEV), |s| {
            mount_tree(s);
            bind(s, b"/m/sub", b"/d/sub", NONE);
            s.linkat(CWD, b"/m/f", CWD, b"/d/sub/f", NOAT)
        }),
        ("rename from a dirfd in the mount", Err(Errno::EXDEV), |s| {
            mount_tree(s);
            let fd = s.open(b"/m", DIR, 0).unwrap();
            s.renameat(fd, b"f", CWD, b"/d/new")
        }),
        (
            "rename over the mount point (EXDEV first)",
            Err(Errno::EXDEV),
            |s| {
                mount_tree(s);
                s.renameat(CWD, b"/m/f", CWD, b"/m")
            },
        ),
    ]);
}

#[test]
fn resolve_no_xdev() {
    fn dirfd_m(s: &dyn Sys, path: &[u8]) -> R {
        mount_tree(s);
        s.symlink(b"/d/f", b"/m/abs");
        s.symlink(b"sub/g", b"/m/rel");
        let fd = s.open(b"/m", DIR, 0).unwrap();
        open2(s, fd, path, RESOLVE_NO_XDEV)
    }
    table::<R>(&[
        ("into a mount", Err(Errno::EXDEV), |s| {
            mount_tree(s);
            open2(s, CWD, b"/m/f", RESOLVE_NO_XDEV)
        }),
        ("ending on a mount point", Err(Errno::EXDEV), |s| {
            mount_tree(s);
            open2(s, CWD, b"/m", RESOLVE_NO_XDEV)
        }),
        ("without the flag", Ok(()), |s| {
            mount_tree(s);
            open2(s, CWD, b"/m/f", 0)
        }),
        ("within the root mount", Ok(()), |s| {
            mount_tree(s);
            open2(s, CWD, b"/d/f", RESOLVE_NO_XDEV)
        }),
        ("within the mount from its root", Ok(()), |s| {
            dirfd_m(s, b"sub/g")
        }),
        (". at the mount's root", Ok(()), |s| dirfd_m(s, b".")),
        ("down and up inside", Ok(()), |s| dirfd_m(s, b"sub/../f")),
        (".. out of the mount", Err(Errno::EXDEV), |s| {
            dirfd_m(s, b"..")
        }),
        (".. out of the mount and on", Err(Errno::EXDEV), |s| {
            dirfd_m(s, b"../d/f")
        }),
        (
            "an absolute path from a dirfd in another mount",
            Ok(()),
            |s| dirfd_m(s, b"/d/f"),
        ),
        ("an absolute path crossing later", Err(Errno::EXDEV), |s| {
            dirfd_m(s, b"/m/f")
        }),
        (
            "an absolute symlink to another mount",
            Err(Errno::EXDEV),
            |s| dirfd_m(s, b"abs"),
        ),
        ("a relative symlink inside", Ok(()), |s| dirfd_m(s, b"rel")),
        ("into a bind of the same fs", Err(Errno::EXDEV), |s| {
            mount_tree(s);
            bind(s, b"/m/sub", b"/d/sub", NONE);
            let fd = s.open(b"/m", DIR, 0).unwrap();
            open2(s, fd, b"../d/sub/g", RESOLVE_NO_XDEV)
        }),
    ]);
}

// ---------------------------------------------------------------------------------------
// EBUSY for mount points

#[test]
fn mount_points_are_busy() {
    /// `/a` = "a", `/b` = "b", then `/a` bound onto `/b`.
    fn files(s: &dyn Sys) {
        s.mkfile(b"/a", b"a");
        s.mkfile(b"/b", b"b");
        bind(s, b"/a", b"/b", NONE);
    }
    table::<R>(&[
        ("rmdir of a mount point", Err(Errno::EBUSY), |s| {
            mount_tree(s);
            s.unlinkat(CWD, b"/m", RMDIR)
        }),
        (
            "unlink of a directory mount point: EISDIR first",
            Err(Errno::EISDIR),
            |s| {
                mount_tree(s);
                s.unlinkat(CWD, b"/m", NOAT)
            },
        ),
        ("rename of a mount point", Err(Errno::EBUSY), |s| {
            mount_tree(s);
            s.renameat(CWD, b"/m", CWD, b"/m2")
        }),
        ("rename over a mount point", Err(Errno::EBUSY), |s| {
            mount_tree(s);
            s.mkdir(b"/empty");
            s.renameat(CWD, b"/empty", CWD, b"/m")
        }),
        (
            "RENAME_EXCHANGE with a mount point",
            Err(Errno::EBUSY),
            |s| {
                mount_tree(s);
                s.renameat2(CWD, b"/d", CWD, b"/m", RenameFlags::EXCHANGE)
            },
        ),
        ("rmdir of a bind mount point", Err(Errno::EBUSY), |s| {
            mount_tree(s);
            bind(s, b"/m/sub", b"/d/sub", NONE);
            s.unlinkat(CWD, b"/d/sub", RMDIR)
        }),
        (
            "rmdir of a bind's source (not a mount point)",
            Ok(()),
            |s| {
                mount_tree(s);
                s.mkdir(b"/src");
                s.mkdir(b"/b");
                bind(s, b"/src", b"/b", NONE);
                s.unlinkat(CWD, b"/src", RMDIR)
            },
        ),
        ("unlink of a file mount point", Err(Errno::EBUSY), |s| {
            files(s);
            s.unlinkat(CWD, b"/b", NOAT)
        }),
        ("rename of a file mount point", Err(Errno::EBUSY), |s| {
            files(s);
            s.renameat(CWD, b"/b", CWD, b"/c")
        }),
        ("rename over a file mount point", Err(Errno::EBUSY), |s| {
            files(s);
            s.mkfile(b"/c", b"c");
            s.renameat(CWD, b"/c", CWD, b"/b")
        }),
        ("unlink of a file bind's source", Ok(()), |s| {
            files(s);
            s.unlinkat(CWD, b"/a", NOAT)
        }),
        (
            "rmdir of a mount point's ancestor: ENOTEMPTY",
            Err(Errno::ENOTEMPTY),
            |s| {
                s.mkdir(b"/p");
                s.mkdir(b"/p/m");
                mount(s, b"/p/m");
                s.unlinkat(CWD, b"/p", RMDIR)
            },
        ),
    ]);
    // A file bound onto a file: the mount point shows the source's data and inode.
    expect(ok(("a".to_string(), true)), |s| {
        files(s);
        Ok((cat(s, b"/b")?, id(s, b"/b")? == id(s, b"/a")?))
    });
}

// ---------------------------------------------------------------------------------------
// umount2

#[test]
fn umount_of_a_busy_mount() {
    table::<R>(&[
        ("an open file inside", Err(Errno::EBUSY), |s| {
            mount_tree(s);
            let _fd = s.open(b"/m/f", RO, 0).unwrap();
            s.umount2(b"/m", NOUM)
        }),
        ("an open file, closed", Ok(()), |s| {
            mount_tree(s);
            let fd = s.open(b"/m/sub/g", RW, 0).unwrap();
            s.close(fd).unwrap();
            s.umount2(b"/m", NOUM)
        }),
        ("an O_PATH descriptor inside", Err(Errno::EBUSY), |s| {
            mount_tree(s);
            let _fd = s.open(b"/m/sub", PATH, 0).unwrap();
            s.umount2(b"/m", NOUM)
        }),
        ("a descriptor of its root", Err(Errno::EBUSY), |s| {
            mount_tree(s);
            let _fd = s.open(b"/m", DIR, 0).unwrap();
            s.umount2(b"/m", NOUM)
        }),
        ("a descriptor of the covered directory", Ok(()), |s| {
            s.mkdir(b"/m");
            let _fd = s.open(b"/m", DIR, 0).unwrap();
            mount(s, b"/m");
            s.umount2(b"/m", NOUM)
        }),
        (
            "a file opened before the mount in the covered dir",
            Ok(()),
            |s| {
                s.mkdir(b"/m");
                s.mkfile(b"/m/hidden", b"h");
                let _fd = s.open(b"/m/hidden", RO, 0).unwrap();
                mount(s, b"/m");
                s.umount2(b"/m", NOUM)
            },
        ),
        ("the cwd inside", Err(Errno::EBUSY), |s| {
            mount_tree(s);
            s.chdir(b"/m/sub").unwrap();
            s.umount2(b"/m", NOUM)
        }),
        ("the cwd at its root", Err(Errno::EBUSY), |s| {
            mount_tree(s);
            s.chdir(b"/m").unwrap();
            s.umount2(b"/m", NOUM)
        }),
        ("the cwd left again", Ok(()), |s| {
            mount_tree(s);
            s.chdir(b"/m/sub").unwrap();
            s.chdir(b"/").unwrap();
            s.umount2(b"/m", NOUM)
        }),
        // The caller's own root inside: a documented deviation (Linux's do_umount_root),
        // see `umount_of_the_task_root_mount`; another task's root there is EBUSY on both
        // (`umount_busy_with_another_tasks_root`).
        ("the root left again", Ok(()), |s| {
            mount_tree(s);
            let top = s.open(b"/", PATH, 0).unwrap();
            s.chroot(b"/m/sub").unwrap();
            s.fchdir(top).unwrap();
            s.chroot(b".").unwrap();
            s.umount2(b"/m", NOUM)
        }),
        ("a submount", Err(Errno::EBUSY), |s| {
            mount_tree(s);
            mount(s, b"/m/sub");
            s.umount2(b"/m", NOUM)
        }),
        ("a submount unmounted first", Ok(()), |s| {
            mount_tree(s);
            mount(s, b"/m/sub");
            s.umount2(b"/m/sub", NOUM).unwrap();
            s.umount2(b"/m", NOUM)
        }),
        ("a busy submount", Err(Errno::EBUSY), |s| {
            mount_tree(s);
            mount(s, b"/m/sub");
            let _fd = s.open(b"/m/sub", DIR, 0).unwrap();
            s.umount2(b"/m/sub", NOUM)
        }),
        ("MNT_FORCE on a busy mount", Err(Errno::EBUSY), |s| {
            mount_tree(s);
            let _fd = s.open(b"/m/f", RO, 0).unwrap();
            s.umount2(b"/m", UmountFlags::FORCE)
        }),
        ("MNT_DETACH on a busy mount", Ok(()), |s| {
            mount_tree(s);
            let _fd = s.open(b"/m/f", RO, 0).unwrap();
            s.chdir(b"/m/sub").unwrap();
            s.umount2(b"/m", DETACH)
        }),
        ("MNT_DETACH with a submount", Ok(()), |s| {
            mount_tree(s);
            mount(s, b"/m/sub");
            s.umount2(b"/m", DETACH)
        }),
        ("a bind of it elsewhere does not pin it", Ok(()), |s| {
            mount_tree(s);
            bind(s, b"/m", b"/d/sub", NONE);
            s.umount2(b"/m", NOUM)
        }),
    ]);
    // After a detach with submounts, neither is reachable.
    expect(ok((sv(&["hidden"]), Err(Errno::ENOENT))), |s| {
        mount_tree(s);
        mount(s, b"/m/sub");
        s.umount2(b"/m", DETACH)?;
        Ok((s.ls(b"/m")?, s.stat(b"/m/sub").map(drop)))
    });
}

#[test]
fn umount_errors() {
    table::<R>(&[
        ("not a mount", Err(Errno::EINVAL), |s| {
            mount_tree(s);
            s.umount2(b"/d", NOUM)
        }),
        ("a directory inside a mount", Err(Errno::EINVAL), |s| {
            mount_tree(s);
            s.umount2(b"/m/sub", NOUM)
        }),
        ("a file", Err(Errno::EINVAL), |s| {
            mount_tree(s);
            s.umount2(b"/m/f", NOUM)
        }),
        ("missing", Err(Errno::ENOENT), |s| {
            mount_tree(s);
            s.umount2(b"/nope", NOUM)
        }),
        ("through a file", Err(Errno::ENOTDIR), |s| {
            mount_tree(s);
            s.umount2(b"/d/f/y", NOUM)
        }),
        ("empty path", Err(Errno::ENOENT), |s| {
            mount_tree(s);
            s.umount2(b"", NOUM)
        }),
        ("twice", Err(Errno::EINVAL), |s| {
            mount_tree(s);
            s.umount2(b"/m", NOUM).unwrap();
            s.umount2(b"/m", NOUM)
        }),
        ("a symlink to a mount point is followed", Ok(()), |s| {
            mount_tree(s);
            s.symlink(b"m", b"/lm");
            s.umount2(b"/lm", NOUM)
        }),
        ("UMOUNT_NOFOLLOW on a symlink", Err(Errno::EINVAL), |s| {
            mount_tree(s);
            s.symlink(b"m", b"/lm");
            s.umount2(b"/lm", UmountFlags::NOFOLLOW)
        }),
        ("UMOUNT_NOFOLLOW on the mount point", Ok(()), |s| {
            mount_tree(s);
            s.umount2(b"/m", UmountFlags::NOFOLLOW)
        }),
        ("a trailing slash", Ok(()), |s| {
            mount_tree(s);
            s.umount2(b"/m/", NOUM)
        }),
        ("unknown flag bits", Err(Errno::EINVAL), |s| {
            mount_tree(s);
            s.umount2(b"/m", UmountFlags::from_bits_retain(0x10))
        }),
        ("MNT_FORCE, not busy", Ok(()), |s| {
            mount_tree(s);
            s.umount2(b"/m", UmountFlags::FORCE)
        }),
        ("MNT_FORCE | MNT_DETACH", Ok(()), |s| {
            mount_tree(s);
            s.umount2(b"/m", UmountFlags::FORCE | DETACH)
        }),
        ("MNT_EXPIRE | MNT_DETACH", Err(Errno::EINVAL), |s| {
            mount_tree(s);
            s.umount2(b"/m", UmountFlags::EXPIRE | DETACH)
        }),
        ("MNT_EXPIRE | MNT_FORCE", Err(Errno::EINVAL), |s| {
            mount_tree(s);
            s.umount2(b"/m", UmountFlags::EXPIRE | UmountFlags::FORCE)
        }),
        ("MNT_EXPIRE the first time", Err(Errno::EAGAIN), |s| {
            mount_tree(s);
            s.umount2(b"/m", UmountFlags::EXPIRE)
        }),
        ("MNT_EXPIRE the second time", Ok(()), |s| {
            mount_tree(s);
            let _ = s.umount2(b"/m", UmountFlags::EXPIRE);
            s.umount2(b"/m", UmountFlags::EXPIRE)
        }),
        (
            "MNT_EXPIRE the first time, busy: EBUSY before marking",
            Err(Errno::EBUSY),
            |s| {
                mount_tree(s);
                let _fd = s.open(b"/m/f", RO, 0).unwrap();
                s.umount2(b"/m", UmountFlags::EXPIRE)
            },
        ),
        ("MNT_EXPIRE the second time, busy", Err(Errno::EBUSY), |s| {
            mount_tree(s);
            let _fd = s.open(b"/m/f", RO, 0).unwrap();
            let _ = s.umount2(b"/m", UmountFlags::EXPIRE);
            s.umount2(b"/m", UmountFlags::EXPIRE)
        }),
        (
            "MNT_EXPIRE after a use in between",
            Err(Errno::EAGAIN),
            |s| {
                mount_tree(s);
                let _ = s.umount2(b"/m", UmountFlags::EXPIRE);
                let fd = s.open(b"/m/f", RO, 0).unwrap();
                s.close(fd).unwrap();
                s.umount2(b"/m", UmountFlags::EXPIRE)
            },
        ),
        ("not root", Err(Errno::EPERM), |s| {
            mount_tree(s);
            s.set_cred(1000, 1000, &[]);
            s.umount2(b"/m", NOUM)
        }),
        ("not root, not a mount", Err(Errno::EPERM), |s| {
            mount_tree(s);
            s.set_cred(1000, 1000, &[]);
            s.umount2(b"/d", NOUM)
        }),
        (
            "not root, missing: the walk first",
            Err(Errno::ENOENT),
            |s| {
                mount_tree(s);
                s.set_cred(1000, 1000, &[]);
                s.umount2(b"/nope", NOUM)
            },
        ),
        (
            "not root, unknown flags: EINVAL first",
            Err(Errno::EINVAL),
            |s| {
                mount_tree(s);
                s.set_cred(1000, 1000, &[]);
                s.umount2(b"/nope", UmountFlags::from_bits_retain(0x10))
            },
        ),
        ("a mount outside the task's root", Err(Errno::ENOENT), |s| {
            mount_tree(s);
            s.chroot(b"/d").unwrap();
            s.umount2(b"/m", NOUM)
        }),
    ]);
}

/// Difference (documented on `Task::umount2`): `umount2` without `MNT_DETACH` of the mount
/// that holds the caller's root (at its root or at a directory inside it). Linux does not
/// unmount it but remounts its super block read-only and returns 0 (`do_umount`: `mnt ==
/// current->fs->root.mnt && !(flags & MNT_DETACH)` -> `do_umount_root`), so every mount of
/// that file system is then `EROFS`. uvfs has no read-only super block and answers `EBUSY`
/// (the root counts as a user); the mount stays mounted and writable. Each side is asserted
/// on its own answer, so a change on either shows.
#[test]
fn umount_of_the_task_root_mount() {
    type Out = Result<(R, R, bool), Errno>;
    // The caller's root is the mount's root.
    let at_root = |s: &mut dyn Sys| -> Out {
        mount_tree(s);
        s.chroot(b"/m")?;
        let r = s.umount2(b"/", NOUM);
        let w = s.mkdirat(CWD, b"/new", 0o755);
        Ok((r, w, s.exists(b"/f")))
    };
    // The caller's root is a directory inside the mount, its cwd outside the root.
    let inside = |s: &mut dyn Sys| -> Out {
        mount_tree(s);
        let top = s.open(b"/", PATH, 0)?;
        s.chroot(b"/m/sub")?;
        s.fchdir(top)?;
        let r = s.umount2(b"m", NOUM);
        let w = s.mkdirat(CWD, b"m/new", 0o755);
        Ok((r, w, s.exists(b"m/f")))
    };
    let uvfs: Out = ok((Err(Errno::EBUSY), Ok(()), true));
    let linux: Out = ok((Ok(()), Err(Errno::EROFS), true));
    for (name, f) in [
        (
            "at its root",
            &at_root as &(dyn Fn(&mut dyn Sys) -> Out + Sync),
        ),
        ("inside", &inside),
    ] {
        assert_eq!(on_uvfs(f), uvfs, "{name}: uvfs's documented EBUSY");
        if let Some(hf) = on_hostfs(f) {
            assert_eq!(hf, uvfs, "{name}: hostfs, uvfs's documented EBUSY");
        }
        if let Some(h) = on_host(f) {
            assert_eq!(h, linux, "{name}: Linux remounts the file system read-only");
        }
    }
}

/// `MNT_EXPIRE` of the caller's root mount: `EINVAL` (do_umount).
#[test]
fn umount_expire_of_the_task_root_mount() {
    expect(ok(Err(Errno::EINVAL)), |s| {
        mount_tree(s);
        s.chroot(b"/m")?;
        Ok(s.umount2(b"/", UmountFlags::EXPIRE))
    });
}

/// With `MNT_DETACH` the caller's root mount is detached; the task's root lives on.
#[test]
fn umount_detach_of_the_task_root_mount() {
    expect(ok((Ok(()), "in".to_string())), |s| {
        mount_tree(s);
        s.chroot(b"/m")?;
        Ok((s.umount2(b"/", DETACH), cat(s, b"/f")?))
    });
}

#[test]
fn lazy_umount_keeps_open_files_and_cwd() {
    expect(
        ok((
            ("in".to_string(), 3, true),
            ("g".to_string(), sv(&["g", "new"]), true),
            (sv(&["hidden"]), Err(Errno::ENOENT)),
            (sv(&["f", "sub"]), true, "inX".to_string()),
        )),
        |s| {
            mount_tree(s);
            let fd = s.open(b"/m/f", RW, 0)?;
            s.chdir(b"/m/sub")?;
            s.umount2(b"/m", DETACH)?;
            // The open file: read, write, fstat.
            let data = String::from_utf8(s.read_to_end(fd)?).unwrap();
            let n = s.write(fd, b"X")? + 2;
            let fst = s.fstat(fd)?;
            let files = (data, n, fst.st_dev != id(s, b"/")?.0);
            // The cwd: relative opens and creates.
            let g = cat(s, b"g")?;
            s.mkfile(b"new", b"");
            let cwd_dev = id(s, b".")?.0;
            let cwd = (g, s.ls(b".")?, cwd_dev == fst.st_dev);
            // From outside: the covered directory again.
            let outside = (s.ls(b"/m")?, s.stat(b"/m/f").map(drop));
            // `..` climbs to the detached root and stays there.
            s.chdir(b"..")?;
            s.chdir(b"..")?;
            let up = (s.ls(b".")?, id(s, b"..")? == id(s, b".")?, cat(s, b"f")?);
            Ok((files, cwd, outside, up))
        },
    );
    // getcwd in a detached mount.
    let _cwd = same(|s| {
        mount_tree(s);
        s.chdir(b"/m/sub").unwrap();
        s.umount2(b"/m", DETACH).unwrap();
        s.getcwd()
    });
    // An open directory descriptor of a detached mount still reads and creates.
    expect(ok((sv(&["f", "new", "sub"]), true)), |s| {
        mount_tree(s);
        let fd = s.open(b"/m", DIR, 0)?;
        s.umount2(b"/m", DETACH)?;
        let nfd = s.openat(fd, b"new", CREAT | WO, 0o644)?;
        s.close(nfd)?;
        let l = s.list_fd(fd, 4096)?;
        let mut names: Vec<_> = l
            .into_iter()
            .map(|(n, _)| n)
            .filter(|n| n != "." && n != "..")
            .collect();
        names.sort();
        Ok((names, s.openat(fd, b"sub/g", RO, 0).is_ok()))
    });
}

// ---------------------------------------------------------------------------------------
// mount errors

#[test]
fn mount_errors() {
    table::<R>(&[
        ("on a directory", Ok(()), |s| {
            s.mkdir(b"/m");
            s.mount_new(b"/m", NONE)
        }),
        ("on a file", Err(Errno::ENOTDIR), |s| {
            s.mkfile(b"/f", b"");
            s.mount_new(b"/f", NONE)
        }),
        ("missing", Err(Errno::ENOENT), |s| {
            s.mount_new(b"/nope", NONE)
        }),
        ("through a file", Err(Errno::ENOTDIR), |s| {
            s.mkfile(b"/f", b"");
            s.mount_new(b"/f/x", NONE)
        }),
        ("a symlink loop", Err(Errno::ELOOP), |s| {
            s.symlink(b"b", b"/a");
            s.symlink(b"a", b"/b");
            s.mount_new(b"/a", NONE)
        }),
        ("not root", Err(Errno::EPERM), |s| {
            s.mkdir(b"/m");
            s.set_cred(1000, 1000, &[]);
            s.mount_new(b"/m", NONE)
        }),
        (
            "not root, missing: the walk first",
            Err(Errno::ENOENT),
            |s| {
                s.set_cred(1000, 1000, &[]);
                s.mount_new(b"/nope", NONE)
            },
        ),
        (
            "not root, no search permission: the walk first",
            Err(Errno::EACCES),
            |s| {
                s.mkdir(b"/p");
                s.mkdir(b"/p/m");
                s.fchmodat(CWD, b"/p", 0o700, NOAT).unwrap();
                s.set_cred(1000, 1000, &[]);
                s.mount_new(b"/p/m", NONE)
            },
        ),
        ("bind: not root", Err(Errno::EPERM), |s| {
            s.mkdir(b"/a");
            s.mkdir(b"/b");
            s.set_cred(1000, 1000, &[]);
            s.mount_bind(b"/a", b"/b", NONE)
        }),
        ("bind: a dir onto a file", Err(Errno::ENOTDIR), |s| {
            s.mkdir(b"/a");
            s.mkfile(b"/b", b"");
            s.mount_bind(b"/a", b"/b", NONE)
        }),
        ("bind: a file onto a dir", Err(Errno::ENOTDIR), |s| {
            s.mkfile(b"/a", b"");
            s.mkdir(b"/b");
            s.mount_bind(b"/a", b"/b", NONE)
        }),
        ("bind: missing source", Err(Errno::ENOENT), |s| {
            s.mkdir(b"/b");
            s.mount_bind(b"/a", b"/b", NONE)
        }),
        ("bind: missing target", Err(Errno::ENOENT), |s| {
            s.mkdir(b"/a");
            s.mount_bind(b"/a", b"/b", NONE)
        }),
        ("bind: a directory onto itself", Ok(()), |s| {
            s.mkdir(b"/a");
            s.mount_bind(b"/a", b"/a", NONE)
        }),
        ("bind: a symlink source is followed", Ok(()), |s| {
            s.mkdir(b"/a");
            s.mkdir(b"/b");
            s.symlink(b"a", b"/la");
            s.mount_bind(b"/la", b"/b", NONE)
        }),
        ("setflags: not a mount root", Err(Errno::EINVAL), |s| {
            s.mkdir(b"/d");
            s.mount_setflags(b"/d", RDONLY)
        }),
        ("setflags: missing", Err(Errno::ENOENT), |s| {
            s.mount_setflags(b"/nope", RDONLY)
        }),
        ("setflags: not root", Err(Errno::EPERM), |s| {
            mount_tree(s);
            s.set_cred(1000, 1000, &[]);
            s.mount_setflags(b"/m", RDONLY)
        }),
    ]);
}

// ---------------------------------------------------------------------------------------
// Bind mounts

#[test]
fn bind_of_a_subdirectory() {
    // Same inode and st_dev at both paths; changes visible both ways; `..` of the bind's
    // root is its mount point's parent.
    expect(
        ok((
            (true, true),
            ("a".to_string(), "b".to_string(), "c".to_string()),
            sv(&["a", "c", "inner"]),
            true,
        )),
        |s| {
            s.mkdir(b"/p");
            s.mkdir(b"/p/src");
            s.mkfile(b"/p/src/a", b"a");
            s.mkdir(b"/p/src/inner");
            s.mkdir(b"/b");
            bind(s, b"/p/src", b"/b", NONE);
            let ids = (
                id(s, b"/b")? == id(s, b"/p/src")?,
                id(s, b"/b/a")? == id(s, b"/p/src/a")?,
            );
            let a = cat(s, b"/b/a")?;
            s.mkfile(b"/p/src/a", b"b");
            let b = cat(s, b"/b/a")?;
            s.mkfile(b"/b/c", b"c");
            let c = cat(s, b"/p/src/c")?;
            Ok((
                ids,
                (a, b, c),
                s.ls(b"/p/src")?,
                id(s, b"/b/..")? == id(s, b"/")?,
            ))
        },
    );
    // A bind of a directory of another mount: that mount's st_dev.
    expect(ok((true, true, true)), |s| {
        mount_tree(s);
        s.mkdir(b"/b");
        bind(s, b"/m/sub", b"/b", NONE);
        Ok((
            id(s, b"/b")? == id(s, b"/m/sub")?,
            id(s, b"/b")?.0 == id(s, b"/m")?.0,
            mnt_id(s, b"/b") != mnt_id(s, b"/m"),
        ))
    });
    // Unmounting the bind leaves the source as it was.
    expect(ok((sv(&[]), sv(&["g"]))), |s| {
        mount_tree(s);
        s.mkdir(b"/b");
        bind(s, b"/m/sub", b"/b", NONE);
        s.umount2(b"/b", NOUM)?;
        Ok((s.ls(b"/b")?, s.ls(b"/m/sub")?))
    });
}

#[test]
fn bind_recursion_and_submounts() {
    /// `/src/` (`inner/` with a new fs holding `deep`), `/b/`; then `src` bound onto `b`.
    fn setup(s: &dyn Sys, flags: MountFlags) {
        s.mkdir(b"/src");
        s.mkdir(b"/src/inner");
        s.mkfile(b"/src/inner/under", b"");
        mount(s, b"/src/inner");
        s.mkfile(b"/src/inner/deep", b"");
        s.mkdir(b"/b");
        bind(s, b"/src", b"/b", flags);
    }
    // Non-recursive: the bind shows the directory under the submount.
    expect(ok((sv(&["under"]), true, sv(&["deep"]))), |s| {
        setup(s, NONE);
        Ok((
            s.ls(b"/b/inner")?,
            id(s, b"/b/inner")?.0 == id(s, b"/src")?.0,
            s.ls(b"/src/inner")?,
        ))
    });
    // Recursive: the submount comes along (its st_dev, its files, both ways).
    expect(ok((sv(&["deep"]), true, true, Err(Errno::EBUSY))), |s| {
        setup(s, REC);
        s.mkfile(b"/src/inner/new", b"");
        Ok((
            s.ls(b"/b/inner").map(|mut v| {
                v.retain(|n| n != "new");
                v
            })?,
            id(s, b"/b/inner")? == id(s, b"/src/inner")?,
            s.exists(b"/b/inner/new"),
            s.umount2(b"/b", NOUM),
        ))
    });
    // Recursive bind: the copy of the submount is unmounted on its own.
    expect(ok((Ok(()), sv(&["under"]), sv(&["deep"]))), |s| {
        setup(s, REC);
        let r = s.umount2(b"/b/inner", NOUM);
        Ok((r, s.ls(b"/b/inner")?, s.ls(b"/src/inner")?))
    });
}

// ---------------------------------------------------------------------------------------
// Read-only mounts

/// [`tree`] with `/m/sym -> f`, the xattr `user.a` = "v" on `/m/f`, and `/m` then made
/// read-only.
fn ro(s: &dyn Sys) {
    mount_tree(s);
    s.symlink(b"f", b"/m/sym");
    s.xattr_set(XTarget::Path(b"/m/f"), b"user.a", b"v", 0)
        .unwrap();
    s.mount_setflags(b"/m", RDONLY).unwrap();
}

#[test]
fn read_only_mount_erofs() {
    table::<R>(&[
        ("open O_WRONLY", Err(Errno::EROFS), |s| {
            ro(s);
            s.open(b"/m/f", WO, 0).map(drop)
        }),
        ("open O_RDWR", Err(Errno::EROFS), |s| {
            ro(s);
            s.open(b"/m/f", RW, 0).map(drop)
        }),
        ("open O_RDONLY|O_TRUNC", Err(Errno::EROFS), |s| {
            ro(s);
            s.open(b"/m/f", RO | OpenFlags::TRUNC, 0).map(drop)
        }),
        ("open O_CREAT of a new file", Err(Errno::EROFS), |s| {
            ro(s);
            s.open(b"/m/new", CREAT | RO, 0o644).map(drop)
        }),
        ("open O_CREAT of an existing file, read-only", Ok(()), |s| {
            ro(s);
            s.open(b"/m/f", CREAT | RO, 0o644).map(drop)
        }),
        (
            "open O_CREAT|O_EXCL of an existing file",
            Err(Errno::EEXIST),
            |s| {
                ro(s);
                s.open(b"/m/f", CREAT | OpenFlags::EXCL | RO, 0o644)
                    .map(drop)
            },
        ),
        ("open O_TMPFILE", Err(Errno::EROFS), |s| {
            ro(s);
            s.open(b"/m", OpenFlags::TMPFILE | RW, 0o600).map(drop)
        }),
        ("open O_RDONLY", Ok(()), |s| {
            ro(s);
            s.open(b"/m/f", RO, 0).map(drop)
        }),
        ("mkdir", Err(Errno::EROFS), |s| {
            ro(s);
            s.mkdirat(CWD, b"/m/new", 0o755)
        }),
        (
            "mkdir of an existing name: EEXIST first",
            Err(Errno::EEXIST),
            |s| {
                ro(s);
                s.mkdirat(CWD, b"/m/sub", 0o755)
            },
        ),
        ("mknod", Err(Errno::EROFS), |s| {
            ro(s);
            s.mknodat(CWD, b"/m/p", S_IFIFO | 0o644, 0)
        }),
        ("symlink", Err(Errno::EROFS), |s| {
            ro(s);
            s.symlinkat(b"f", CWD, b"/m/l2")
        }),
        ("link", Err(Errno::EROFS), |s| {
            ro(s);
            s.linkat(CWD, b"/m/f", CWD, b"/m/f2", NOAT)
        }),
        ("unlink", Err(Errno::EROFS), |s| {
            ro(s);
            s.unlinkat(CWD, b"/m/f", NOAT)
        }),
        (
            "unlink of a missing name: EROFS first",
            Err(Errno::EROFS),
            |s| {
                ro(s);
                s.unlinkat(CWD, b"/m/nope", NOAT)
            },
        ),
        ("rmdir", Err(Errno::EROFS), |s| {
            ro(s);
            s.unlinkat(CWD, b"/m/sub", RMDIR)
        }),
        ("rename", Err(Errno::EROFS), |s| {
            ro(s);
            s.renameat(CWD, b"/m/f", CWD, b"/m/f2")
        }),
        ("chmod", Err(Errno::EROFS), |s| {
            ro(s);
            s.fchmodat(CWD, b"/m/f", 0o600, NOAT)
        }),
        ("fchmod", Err(Errno::EROFS), |s| {
            ro(s);
            let fd = s.open(b"/m/f", RO, 0).unwrap();
            s.fchmod(fd, 0o600)
        }),
        ("chown", Err(Errno::EROFS), |s| {
            ro(s);
            s.fchownat(CWD, b"/m/f", 1, 1, NOAT)
        }),
        ("fchown", Err(Errno::EROFS), |s| {
            ro(s);
            let fd = s.open(b"/m/f", RO, 0).unwrap();
            s.fchown(fd, 1, 1)
        }),
        ("utimensat with times", Err(Errno::EROFS), |s| {
            ro(s);
            s.utimensat(CWD, b"/m/f", Some(&[T2001, T2002]), NOAT)
        }),
        ("utimensat now", Err(Errno::EROFS), |s| {
            ro(s);
            s.utimensat(CWD, b"/m/f", None, NOAT)
        }),
        ("futimens", Err(Errno::EROFS), |s| {
            ro(s);
            let fd = s.open(b"/m/f", RO, 0).unwrap();
            s.futimens(fd, None)
        }),
        ("truncate", Err(Errno::EROFS), |s| {
            ro(s);
            s.truncate(b"/m/f", 0)
        }),
        ("setxattr", Err(Errno::EROFS), |s| {
            ro(s);
            s.xattr_set(XTarget::Path(b"/m/f"), b"user.b", b"v", 0)
        }),
        ("removexattr", Err(Errno::EROFS), |s| {
            ro(s);
            s.xattr_remove(XTarget::Path(b"/m/f"), b"user.a")
        }),
        ("access W_OK", Err(Errno::EROFS), |s| {
            ro(s);
            s.faccessat2(CWD, b"/m/f", W_OK, NOAT)
        }),
        ("access R_OK", Ok(()), |s| {
            ro(s);
            s.faccessat2(CWD, b"/m/f", R_OK, NOAT)
        }),
        (
            "open O_WRONLY, not permitted: EACCES first",
            Err(Errno::EACCES),
            |s| {
                ro(s);
                s.set_cred(1000, 1000, &[]);
                s.open(b"/m/f", WO, 0).map(drop)
            },
        ),
        (
            "open O_TRUNC, not permitted: EROFS first",
            Err(Errno::EROFS),
            |s| {
                ro(s);
                s.set_cred(1000, 1000, &[]);
                s.open(b"/m/f", WO | OpenFlags::TRUNC, 0).map(drop)
            },
        ),
        (
            "chmod, not the owner: EROFS first",
            Err(Errno::EROFS),
            |s| {
                ro(s);
                s.set_cred(1000, 1000, &[]);
                s.fchmodat(CWD, b"/m/f", 0o600, NOAT)
            },
        ),
        ("the mount point's parent stays writable", Ok(()), |s| {
            ro(s);
            s.mkdirat(CWD, b"/new", 0o755)
        }),
        ("a submount of a read-only mount is writable", Ok(()), |s| {
            mount_tree(s);
            mount(s, b"/m/sub");
            s.mount_setflags(b"/m", RDONLY).unwrap();
            s.mkdirat(CWD, b"/m/sub/new", 0o755)
        }),
        (
            "a new mount, read-only from the start",
            Err(Errno::EROFS),
            |s| {
                s.mkdir(b"/m");
                s.mount_new(b"/m", RDONLY).unwrap();
                s.mkdirat(CWD, b"/m/new", 0o755)
            },
        ),
        (
            "made read-only with a file open for writing",
            Err(Errno::EBUSY),
            |s| {
                mount_tree(s);
                let _fd = s.open(b"/m/f", WO, 0).unwrap();
                s.mount_setflags(b"/m", RDONLY)
            },
        ),
        ("made read-only with a file open for reading", Ok(()), |s| {
            mount_tree(s);
            let _fd = s.open(b"/m/f", RO, 0).unwrap();
            s.mount_setflags(b"/m", RDONLY)
        }),
        ("made writable again", Ok(()), |s| {
            ro(s);
            s.mount_setflags(b"/m", NONE).unwrap();
            s.mkdirat(CWD, b"/m/new", 0o755)
        }),
    ]);
    // Reads still work.
    expect(
        ok((
            "in".to_string(),
            sv(&["f", "sub", "sym"]),
            b"f".to_vec(),
            1,
            true,
        )),
        |s| {
            ro(s);
            let mut v = [0u8; 8];
            let n = s.xattr_get(XTarget::Path(b"/m/f"), b"user.a", &mut v)?;
            let fd = s.open(b"/m/sub", DIR, 0)?;
            Ok((
                cat(s, b"/m/sym")?,
                s.ls(b"/m")?,
                s.readlink(b"/m/sym")?,
                n,
                s.fstat(fd).is_ok(),
            ))
        },
    );
}

#[test]
fn read_only_bind_of_a_writable_mount() {
    table::<R>(&[
        ("mkdir through the read-only bind", Err(Errno::EROFS), |s| {
            mount_tree(s);
            bind(s, b"/m", b"/d/sub", NONE);
            s.mount_setflags(b"/d/sub", RDONLY).unwrap();
            s.mkdirat(CWD, b"/d/sub/new", 0o755)
        }),
        ("open for writing through it", Err(Errno::EROFS), |s| {
            mount_tree(s);
            bind(s, b"/m", b"/d/sub", NONE);
            s.mount_setflags(b"/d/sub", RDONLY).unwrap();
            s.open(b"/d/sub/f", WO, 0).map(drop)
        }),
        ("mkdir through the original", Ok(()), |s| {
            mount_tree(s);
            bind(s, b"/m", b"/d/sub", NONE);
            s.mount_setflags(b"/d/sub", RDONLY).unwrap();
            s.mkdirat(CWD, b"/m/new", 0o755)
        }),
        (
            "a file opened for writing through the original",
            Ok(()),
            |s| {
                mount_tree(s);
                let fd = s.open(b"/m/f", WO, 0).unwrap();
                bind(s, b"/m", b"/d/sub", NONE);
                s.mount_setflags(b"/d/sub", RDONLY).unwrap();
                s.write(fd, b"w").map(drop)
            },
        ),
        (
            "open for writing, not permitted: EACCES first",
            Err(Errno::EACCES),
            |s| {
                mount_tree(s);
                bind(s, b"/m", b"/d/sub", NONE);
                s.mount_setflags(b"/d/sub", RDONLY).unwrap();
                s.set_cred(1000, 1000, &[]);
                s.open(b"/d/sub/f", WO, 0).map(drop)
            },
        ),
        (
            "a read-only bind of a directory of the root mount",
            Err(Errno::EROFS),
            |s| {
                mount_tree(s);
                bind(s, b"/d", b"/m/sub", NONE);
                s.mount_setflags(b"/m/sub", RDONLY).unwrap();
                s.unlinkat(CWD, b"/m/sub/x", NOAT)
            },
        ),
        ("... leaves the source writable", Ok(()), |s| {
            mount_tree(s);
            bind(s, b"/d", b"/m/sub", NONE);
            s.mount_setflags(b"/m/sub", RDONLY).unwrap();
            s.unlinkat(CWD, b"/d/f", NOAT)
        }),
        ("a rw bind of a read-only mount is writable", Ok(()), |s| {
            ro(s);
            bind(s, b"/m", b"/d/sub", NONE);
            s.mount_setflags(b"/d/sub", NONE).unwrap();
            s.mkdirat(CWD, b"/d/sub/new", 0o755)
        }),
        (
            "a bind of a read-only mount is read-only",
            Err(Errno::EROFS),
            |s| {
                ro(s);
                bind(s, b"/m", b"/d/sub", NONE);
                s.mkdirat(CWD, b"/d/sub/new", 0o755)
            },
        ),
    ]);
}

// ---------------------------------------------------------------------------------------
// Per-mount flags: statfs, noexec, nodev

#[test]
fn statfs_flags_per_mount() {
    expect(
        ok((
            ST_BASE,
            ST_BASE | ST_RDONLY,
            ST_BASE | ST_NOSUID | ST_NODEV,
            ST_BASE | ST_RDONLY,
            ST_BASE | ST_NOEXEC,
        )),
        |s| {
            mount_tree(s);
            s.mount_setflags(b"/m", RDONLY)?;
            s.mkdir(b"/b");
            bind(s, b"/d", b"/b", NONE);
            s.mount_setflags(b"/b", MountFlags::NOSUID | MountFlags::NODEV)?;
            let fd = s.open(b"/m/sub", DIR, 0)?;
            s.mkdir(b"/n");
            s.mount_new(b"/n", MountFlags::NOEXEC)?;
            Ok((
                s.statfs(b"/d")?.f_flags,
                s.statfs(b"/m/f")?.f_flags,
                s.statfs(b"/b/f")?.f_flags,
                s.fstatfs(fd)?.f_flags,
                s.statfs(b"/n")?.f_flags,
            ))
        },
    );
    // Setting flags replaces them (it does not add).
    expect(
        ok((ST_BASE | ST_NOEXEC | ST_NOSUID, ST_BASE | ST_NODEV, ST_BASE)),
        |s| {
            mount_tree(s);
            s.mount_setflags(b"/m", MountFlags::NOEXEC | MountFlags::NOSUID)?;
            let a = s.statfs(b"/m")?.f_flags;
            s.mount_setflags(b"/m", MountFlags::NODEV)?;
            let b = s.statfs(b"/m")?.f_flags;
            s.mount_setflags(b"/m", NONE)?;
            Ok((a, b, s.statfs(b"/m")?.f_flags))
        },
    );
}

#[test]
fn noexec() {
    /// `/m/prog` (empty, 0755) and `/m/dir/`, `/m` then `noexec`.
    fn setup(s: &dyn Sys, flags: MountFlags) {
        mount_tree(s);
        s.mkfile(b"/m/prog", b"");
        s.fchmodat(CWD, b"/m/prog", 0o755, NOAT).unwrap();
        s.mkdir(b"/m/dir");
        s.mount_setflags(b"/m", flags).unwrap();
    }
    table::<R>(&[
        ("exec on a plain mount", Ok(()), |s| {
            setup(s, NONE);
            s.exec_check(b"/m/prog")
        }),
        ("exec on noexec", Err(Errno::EACCES), |s| {
            setup(s, MountFlags::NOEXEC);
            s.exec_check(b"/m/prog")
        }),
        ("access X_OK on noexec", Err(Errno::EACCES), |s| {
            setup(s, MountFlags::NOEXEC);
            s.faccessat2(CWD, b"/m/prog", X_OK, NOAT)
        }),
        ("access X_OK on a plain mount", Ok(()), |s| {
            setup(s, NONE);
            s.faccessat2(CWD, b"/m/prog", X_OK, NOAT)
        }),
        ("search of a directory on noexec", Ok(()), |s| {
            setup(s, MountFlags::NOEXEC);
            s.faccessat2(CWD, b"/m/dir", X_OK, NOAT)?;
            s.chdir(b"/m/dir")
        }),
        ("read of a program on noexec", Ok(()), |s| {
            setup(s, MountFlags::NOEXEC);
            s.open(b"/m/prog", RO, 0).map(drop)
        }),
        ("exec through a plain bind of a noexec mount", Ok(()), |s| {
            setup(s, MountFlags::NOEXEC);
            bind(s, b"/m", b"/d/sub", NONE);
            s.mount_setflags(b"/d/sub", NONE).unwrap();
            s.exec_check(b"/d/sub/prog")
        }),
        (
            "exec through a noexec bind of a plain mount",
            Err(Errno::EACCES),
            |s| {
                setup(s, NONE);
                bind(s, b"/m", b"/d/sub", NONE);
                s.mount_setflags(b"/d/sub", MountFlags::NOEXEC).unwrap();
                s.exec_check(b"/d/sub/prog")
            },
        ),
        ("exec on a new noexec mount", Err(Errno::EACCES), |s| {
            s.mkdir(b"/n");
            s.mount_new(b"/n", MountFlags::NOEXEC).unwrap();
            s.mkfile(b"/n/prog", b"");
            s.fchmodat(CWD, b"/n/prog", 0o755, NOAT).unwrap();
            s.exec_check(b"/n/prog")
        }),
    ]);
}

#[test]
fn nodev() {
    /// `/m/c`, a character device with no driver (240:7), `/m` then with `flags`.
    fn dev(s: &dyn Sys, flags: MountFlags) -> R {
        mount_tree(s);
        s.mknodat(CWD, b"/m/c", S_IFCHR | 0o666, (240 << 8) | 7)
            .unwrap();
        s.mount_setflags(b"/m", flags).unwrap();
        s.open(b"/m/c", RW, 0).map(drop)
    }
    table::<R>(&[
        ("open of a device", Err(Errno::ENXIO), |s| dev(s, NONE)),
        ("open of a device on nodev", Err(Errno::EACCES), |s| {
            dev(s, MountFlags::NODEV)
        }),
        ("O_PATH open of a device on nodev", Ok(()), |s| {
            let _ = dev(s, MountFlags::NODEV);
            s.open(b"/m/c", PATH, 0).map(drop)
        }),
        ("mknod of a device on nodev", Ok(()), |s| {
            mount_tree(s);
            s.mount_setflags(b"/m", MountFlags::NODEV).unwrap();
            s.mknodat(CWD, b"/m/c", S_IFCHR | 0o666, (240 << 8) | 7)
        }),
        // A FIFO is no device: no EACCES (no reader: ENXIO, as without nodev).
        ("open of a FIFO on nodev", Err(Errno::ENXIO), |s| {
            mount_tree(s);
            s.mknodat(CWD, b"/m/p", S_IFIFO | 0o666, 0).unwrap();
            s.mount_setflags(b"/m", MountFlags::NODEV).unwrap();
            s.open(b"/m/p", WO | OpenFlags::NONBLOCK, 0).map(drop)
        }),
    ]);
}

// ---------------------------------------------------------------------------------------
// Mount ids and the mount table

#[test]
fn stx_mnt_id_per_mount() {
    expect(ok(((true, true), (true, true, true), true, true)), |s| {
        mount_tree(s);
        s.mkdir(b"/b");
        bind(s, b"/m/sub", b"/b", NONE);
        let (root, m, b) = (mnt_id(s, b"/"), mnt_id(s, b"/m"), mnt_id(s, b"/b"));
        let mask = s.statx(CWD, b"/m/f", NOAT, STATX_MNT_ID)?.stx_mask;
        Ok((
            (mnt_id(s, b"/d/f") == root, mnt_id(s, b"/m/sub/g") == m),
            (m != root, b != m, b != root),
            mnt_id(s, b"/b/g") == b,
            mask & STATX_MNT_ID != 0,
        ))
    });
    // The id is the mount table's.
    expect(ok(true), |s| {
        mount_tree(s);
        let id = mnt_id(s, b"/m/f");
        let t = s.mountinfo()?;
        Ok(t.iter().any(|e| e.mount_point == b"/m" && e.id == id))
    });
}

fn sorted_shape(s: &dyn Sys) -> Vec<MntShape> {
    let t = s.mountinfo().unwrap();
    check_mount_table(s, &t);
    let mut v = mount_shape(&t);
    v.sort();
    v
}

fn e(mp: &str, root: &str, flags: MountFlags, parent: Option<&str>) -> MntShape {
    MntShape {
        mount_point: mp.into(),
        root: root.into(),
        flags: flags.bits(),
        parent: parent.map(Into::into),
    }
}

#[test]
fn mount_table_shape() {
    let ro_nx = MountFlags::RDONLY | MountFlags::NOEXEC;
    expect(
        vec![
            e("/", "/", NONE, None),
            e("/b", "/sub", ro_nx, Some("/")),
            e("/m", "/", NONE, Some("/")),
            e("/m", "/", NONE, Some("/m")),
            e("/m/sub", "/", MountFlags::NODEV, Some("/m")),
        ],
        |s| {
            mount_tree(s);
            s.mkdir(b"/b");
            bind(s, b"/m", b"/m", NONE);
            bind(s, b"/m/sub", b"/b", NONE);
            s.mount_setflags(b"/b", ro_nx).unwrap();
            s.mount_new(b"/m/sub", MountFlags::NODEV).unwrap();
            sorted_shape(s)
        },
    );
    // Unmounted entries leave; after a chroot only what is under the root is listed,
    // relative to it.
    expect(
        vec![e("/", "/", NONE, None), e("/sub", "/", NONE, Some("/"))],
        |s| {
            mount_tree(s);
            s.mkdir(b"/n");
            mount(s, b"/n");
            mount(s, b"/m/sub");
            s.umount2(b"/n", NOUM).unwrap();
            s.chroot(b"/m").unwrap();
            sorted_shape(s)
        },
    );
    // A root inside a mount (not its root): that mount's root is above the task's root,
    // so only what is mounted under the task's root is listed (Linux's `show_mountinfo`
    // skips a mount whose root `seq_path_root` cannot reach).
    expect(vec![e("/inner", "/", NONE, None)], |s| {
        mount_tree(s);
        s.mkdir(b"/m/sub/inner");
        mount(s, b"/m/sub/inner");
        s.chroot(b"/m/sub").unwrap();
        mount_shape(&s.mountinfo().unwrap())
    });
    // A recursive bind copies the submounts' entries.
    expect(
        vec![
            e("/", "/", NONE, None),
            e("/b", "/", NONE, Some("/")),
            e("/b/sub", "/", NONE, Some("/b")),
            e("/m", "/", NONE, Some("/")),
            e("/m/sub", "/", NONE, Some("/m")),
        ],
        |s| {
            mount_tree(s);
            mount(s, b"/m/sub");
            s.mkdir(b"/b");
            bind(s, b"/m", b"/b", REC);
            sorted_shape(s)
        },
    );
    // Entries in table order: parents first (the sides may order siblings differently).
    same(|s| {
        mount_tree(s);
        mount(s, b"/m/sub");
        s.mkdir(b"/n");
        mount(s, b"/n");
        s.mkdir(b"/n/x");
        mount(s, b"/n/x");
        let t = s.mountinfo().unwrap();
        check_mount_table(s, &t);
        t.len()
    });
}

// ---------------------------------------------------------------------------------------
// uvfs's own API (no Linux side: what `Sys` cannot say or the host sandbox cannot show)

/// Another task's root or cwd inside a mount makes it busy (Linux: the `fs_struct`'s
/// references count in `mnt_get_count`); the caller's own root is `umount_of_the_task_root_mount`.
#[test]
fn umount_busy_with_another_tasks_root() {
    for u in each_fs() {
        let s: &dyn Sys = &u;
        mount_tree(s);
        let t = &u.task;
        let child = t.fork();
        child.chroot("/m/sub").unwrap();
        assert_eq!(t.umount2("/m", NOUM), Err(Errno::EBUSY), "a root inside");
        drop(child);
        let child = t.fork();
        child.chdir("/m/sub").unwrap();
        assert_eq!(t.umount2("/m", NOUM), Err(Errno::EBUSY), "a cwd inside");
        drop(child);
        assert_eq!(t.umount2("/m", NOUM), Ok(()), "both gone");
    }
}

/// The calls' own argument rules: a file system attaches once (`EBUSY` after); flags
/// outside a call's set are `EINVAL` (uvfs's mount_bind refuses per-mount flags, which
/// Linux's `MS_BIND` silently ignores); the namespace's root mount does not unmount.
#[test]
fn uvfs_mount_api_rules() {
    for u in each_fs() {
        let t = &u.task;
        for d in ["/a", "/b", "/c"] {
            t.mkdirat(CWD, d, 0o755).unwrap();
        }
        let fs = uvfs::tmpfs::mount(Default::default());
        assert_eq!(t.mount(&fs, "/a", NONE), Ok(()));
        assert_eq!(
            t.mount(&fs, "/b", NONE),
            Err(Errno::EBUSY),
            "attached before"
        );
        assert_eq!(
            t.mount(&u.mnt, "/b", NONE),
            Err(Errno::EBUSY),
            "the root's own"
        );
        let fs2 = uvfs::tmpfs::mount(Default::default());
        for bad in [MountFlags::BIND, REC, MountFlags::REMOUNT] {
            assert_eq!(t.mount(&fs2, "/b", bad), Err(Errno::EINVAL), "{bad:?}");
            assert_eq!(t.mount_setflags("/a", bad), Err(Errno::EINVAL), "{bad:?}");
        }
        assert_eq!(t.mount_bind("/a", "/b", RDONLY), Err(Errno::EINVAL));
        assert_eq!(t.mount_bind("/a", "/b", REC), Ok(()));
        assert_eq!(
            t.umount2("/", NOUM),
            Err(Errno::EINVAL),
            "the namespace root"
        );
        assert_eq!(
            t.umount2("/", DETACH),
            Err(Errno::EINVAL),
            "the namespace root"
        );
        assert_eq!(t.umount2("/a", NOUM), Ok(()));
        assert_eq!(
            t.mount(&fs, "/c", NONE),
            Err(Errno::EBUSY),
            "attached before, gone"
        );
    }
}

/// The listing's documented shape: the top is the root mount, its parent id its own;
/// `dev` is `st_dev`; `fs_type` names the file system; `root` is a bind's directory.
#[test]
fn uvfs_mountinfo_fields() {
    for u in each_fs() {
        let s: &dyn Sys = &u;
        mount_tree(s);
        s.mkdir(b"/b");
        bind(s, b"/m/sub", b"/b", NONE);
        s.mount_setflags(b"/b", RDONLY | MountFlags::NOSUID)
            .unwrap();
        let mi = u.task.mountinfo();
        let kind = if u.host.is_some() { "hostfs" } else { "tmpfs" };
        assert_eq!(mi.len(), 3, "{mi:?}");
        assert_eq!(
            (mi[0].mount_point.as_slice(), mi[0].parent_id, mi[0].fs_type),
            (&b"/"[..], mi[0].mnt_id, kind)
        );
        let m = &mi[1];
        assert_eq!(
            (m.mount_point.as_slice(), m.root.as_slice()),
            (&b"/m"[..], &b"/"[..])
        );
        assert_eq!(
            (m.parent_id, m.fs_type, m.flags),
            (mi[0].mnt_id, kind, NONE)
        );
        assert_eq!(m.dev, s.stat(b"/m/f").unwrap().st_dev);
        let b = &mi[2];
        assert_eq!(
            (b.mount_point.as_slice(), b.root.as_slice()),
            (&b"/b"[..], &b"/sub"[..])
        );
        assert_eq!((b.parent_id, b.dev), (mi[0].mnt_id, m.dev));
        assert_eq!(b.flags, RDONLY | MountFlags::NOSUID);
        assert_eq!(b.mnt_id, mnt_id(s, b"/b/g"));
    }
}
