//! Regression tests for what the review of the VFS seam, xattr and hardening work (since
//! 0c02ff0) found. Each test states the bug, its cause, what Linux does, and the fix.

mod common;
use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use uvfs::{tmpfs, Errno, OpenFlags, Task, TmpfsOptions};

const RW_CREAT: OpenFlags = OpenFlags::RDWR.union(OpenFlags::CREAT);

/// Bug: a write into a hole of a range that a concurrent `fallocate` is filling fails with
/// `ENOSPC` on a mount whose `size=` holds the whole range, although neither call asks for
/// more than the mount has.
/// Cause: regular.rs `fallocate` reserves the pages of every hole up front (`budget`), then
/// drops the data lock between `FALLOC_BATCH` batches. A `write_at` that runs in between into
/// a hole not yet allocated charges its own page (`reserve_blocks(1)`), but the space is
/// held by the fallocate's unspent budget: `used + budget + 1 > max`.
/// Linux: `shmem_fallocate` holds `inode_lock` for the whole call, so the write waits, then
/// finds the page allocated and needs no new space: never `ENOSPC` here (checked on the
/// host: tmpfs size=64m, fallocate 64 MiB while another thread pwrites into the range).
/// Fix: let a writer that finds a vacant page inside an in-flight fallocate range take one
/// page of that fallocate's budget (e.g. keep the budget/range in `RegData` under the data
/// lock), or retry its reservation after the fallocate has given back its leftover.
#[test]
fn write_during_fallocate_of_the_whole_mount_is_not_enospc() {
    const SIZE: u64 = 64 << 20;
    let mnt = tmpfs::mount(TmpfsOptions {
        size: Some(SIZE),
        ..Default::default()
    });
    let t = Task::init(&mnt);
    let fd = t.open("/f", RW_CREAT, 0o644).unwrap();
    let mut enospc = 0;
    for _round in 0..5 {
        t.ftruncate(fd, 0).unwrap();
        let done = AtomicBool::new(false);
        let writer = t.clone_thread();
        let (r, n) = std::thread::scope(|s| {
            let done = &done;
            let w = s.spawn(move || {
                let mut n = 0;
                // From the last page down: pages the fallocate (ascending) has not reached.
                let mut page = SIZE / 4096;
                // Relaxed: the stop flag publishes nothing.
                while !done.load(Ordering::Relaxed) && page > 0 {
                    page -= 1;
                    match writer.pwrite(fd, b"x", (page * 4096) as i64) {
                        Ok(1) => {}
                        Err(Errno::ENOSPC) => n += 1,
                        other => panic!("pwrite: {other:?}"),
                    }
                    std::thread::yield_now();
                }
                n
            });
            let r = t.fallocate(fd, 0, 0, SIZE as i64);
            // Relaxed: a stop flag only; the join below orders everything else.
            done.store(true, Ordering::Relaxed);
            (r, w.join().unwrap())
        });
        assert_eq!(r, Ok(()), "fallocate of exactly the mount's size");
        enospc += n;
    }
    assert_eq!(
        enospc, 0,
        "writes inside the fallocated range failed with ENOSPC (Linux: never)"
    );
}

/// Bug: extended attributes are not served over the mount: `setxattr(2)` on a `uvfs mount`
/// fails with `EOPNOTSUPP` (the server has no `getxattr`/`setxattr`/`listxattr`/
/// `removexattr`, so fuser answers `ENOSYS`, which the kernel turns into `EOPNOTSUPP`), so
/// stress-ng's xattr stressor still fails on the mount. Issue 15 asks: "Add them to the
/// library ... and serve them over the mount (getxattr, setxattr with XATTR_CREATE/REPLACE,
/// listxattr, removexattr; ENODATA, ERANGE, E2BIG, EPERM exactly as tmpfs)".
/// Fix: implement the four `Filesystem` methods in fuse/server/mod.rs on top of
/// `Task::{lgetxattr, lsetxattr, llistxattr, lremovexattr}` of the node (with the size-0
/// query replies `reply.size(n)`, and `ERANGE` when the kernel's size is too small).
#[cfg(feature = "fuse")]
#[test]
fn xattrs_are_served_over_the_mount() {
    if !rustix::process::geteuid().is_root() || std::fs::metadata("/dev/fuse").is_err() {
        assert!(
            std::env::var_os("UVFS_REQUIRE_FUSE").is_none(),
            "UVFS_REQUIRE_FUSE=1 but not root or no /dev/fuse"
        );
        println!("skipped: not root or no /dev/fuse");
        return;
    }
    use uvfs::fuse::{FuseOptions, UvfsFuse};
    let dir = tempfile::tempdir().unwrap();
    let mp = dir.path().to_str().unwrap().to_owned();
    let mnt = tmpfs::mount(Default::default());
    let t = Task::init(&mnt);
    let fd = t.open("/f", RW_CREAT, 0o644).unwrap();
    t.close(fd).unwrap();
    let fs = UvfsFuse::new(&mnt, FuseOptions::default());
    let mut cfg = fuser::Config::default();
    cfg.mount_options = vec![
        fuser::MountOption::DefaultPermissions,
        fuser::MountOption::RW,
    ];
    let session = fuser::Session::new(fs, &mp, &cfg).unwrap();
    let bg = session.spawn().unwrap();
    let f = format!("{mp}/f");
    let set = rustix::fs::setxattr(&f, "user.a", b"v", rustix::fs::XattrFlags::empty());
    let mut buf = [0u8; 16];
    let got = rustix::fs::getxattr(&f, "user.a", &mut buf[..]);
    drop(bg);
    assert_eq!(set, Ok(()), "setxattr through the mount");
    assert_eq!(got, Ok(1), "getxattr through the mount");
    let mut buf = [0u8; 16];
    assert_eq!(
        t.getxattr("/f", "user.a", &mut buf),
        Ok(1),
        "stored in uvfs"
    );
}

/// Bug: `setxattr("security.capability")` stores any value: as root, a value that is not a
/// valid `vfs_cap_data` header succeeds on uvfs; Linux gives `EINVAL`.
/// Linux: `vfs_setxattr` calls `cap_convert_nscap` for `security.capability` before the
/// permission checks: `EINVAL` for a bad header (`validheader`), then `EPERM` without
/// `CAP_SETFCAP` over the inode. xattr.rs documents "not validated or converted" as a
/// difference, but issue 15 asks for tmpfs's errnos exactly, and a program probing file
/// capabilities (libcap's `setcap` fallbacks, stress-ng) sees a value stored that Linux
/// refuses.
/// Fix: in `do_setxattr`, for `security.capability` with a non-empty value, check the
/// header as `validheader` does (size >= 4 bytes of magic_etc, revision 1/2/3 with sizes
/// 12/20/24) -> `EINVAL`, then `CAP_SETFCAP` (root) -> `EPERM`, before `xattr_permission`.
#[test]
fn security_capability_value_is_validated() {
    table::<Result<(), Errno>>(&[
        (
            "root sets security.capability to a bogus value",
            Err(Errno::EINVAL),
            |s| {
                s.mkfile(b"/f", b"");
                s.xattr_set(XTarget::Path(b"/f"), b"security.capability", b"v", 0)
            },
        ),
        (
            "a version 2 magic with stray flag bits",
            Err(Errno::EINVAL),
            |s| {
                s.mkfile(b"/f", b"");
                let mut v = [0u8; 20];
                v[..4].copy_from_slice(&0x0200_0002u32.to_le_bytes());
                s.xattr_set(XTarget::Path(b"/f"), b"security.capability", &v, 0)
            },
        ),
        ("a version 2 value with the effective flag", Ok(()), |s| {
            s.mkfile(b"/f", b"");
            let mut v = [0u8; 20];
            v[..4].copy_from_slice(&0x0200_0001u32.to_le_bytes());
            s.xattr_set(XTarget::Path(b"/f"), b"security.capability", &v, 0)
        }),
        (
            "a version 3 value whose root id maps to no user",
            Err(Errno::EINVAL),
            |s| {
                s.mkfile(b"/f", b"");
                let mut v = [0u8; 24];
                v[..4].copy_from_slice(&0x0300_0000u32.to_le_bytes());
                v[20..].copy_from_slice(&u32::MAX.to_le_bytes());
                s.xattr_set(XTarget::Path(b"/f"), b"security.capability", &v, 0)
            },
        ),
    ]);
}
