//! `uvfs::fuse::UvfsFuse` mounted by an embedding program that also changes the namespace
//! through the Rust API: the mount must never let a caller past a permission check because
//! the kernel's cache is stale. Needs root, /dev/fuse and setpriv; skipped (with a line
//! saying why) without them, unless `UVFS_REQUIRE_FUSE=1`.
#![cfg(feature = "fuse")]

use std::process::Command;
use std::time::Duration;

use uvfs::fuse::{FuseOptions, UvfsFuse};
use uvfs::{AtFlags, Fd, OpenFlags, Task};

/// Why this machine cannot run the test, if it cannot.
fn missing() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("not root".into());
    }
    if std::fs::metadata("/dev/fuse").is_err() {
        return Some("no /dev/fuse".into());
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        return Some("no setpriv".into());
    }
    None
}

/// Bug (found in review): with `default_permissions`, a name the kernel had cached as
/// missing, then created by root through the Rust API (mode 0600), could be opened with
/// `O_CREAT|O_TRUNC` by any user: the kernel sends CREATE for a name it thinks missing and
/// skips its own permission check of the open, and the server (running with the caller's
/// ids and root's capabilities) opened the existing file and truncated it.
/// Fix: the server creates exclusively and answers ESTALE when the name exists, so the VFS
/// looks it up again and opens it the checked way.
#[test]
fn create_over_a_name_the_kernel_thought_missing_is_checked() {
    if let Some(why) = missing() {
        assert!(
            std::env::var_os("UVFS_REQUIRE_FUSE").is_none(),
            "UVFS_REQUIRE_FUSE=1 but {why}"
        );
        println!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mp = dir.path().to_str().unwrap().to_owned();
    let mnt = uvfs::tmpfs::mount(Default::default());
    let t = Task::init(&mnt);
    let fs = UvfsFuse::new(&mnt, FuseOptions::default());
    let mut cfg = fuser::Config::default();
    cfg.mount_options = vec![
        fuser::MountOption::DefaultPermissions,
        fuser::MountOption::RW,
    ];
    cfg.acl = fuser::SessionACL::All;
    let session = fuser::Session::new(fs, &mp, &cfg).unwrap();
    let bg = session.spawn().unwrap();
    let f = format!("{mp}/secret");
    // The kernel caches "secret" as missing (a negative entry, 1 s).
    assert_eq!(
        std::fs::metadata(&f).map_err(|e| e.kind()).err(),
        Some(std::io::ErrorKind::NotFound)
    );
    // Root creates it behind the kernel's back.
    let fd = t
        .openat(
            Fd::AT_FDCWD,
            "/secret",
            OpenFlags::CREAT | OpenFlags::WRONLY,
            0o600,
        )
        .unwrap();
    t.write(fd, b"top secret").unwrap();
    t.close(fd).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c"])
        .arg(format!(
            "import os\ntry:\n os.open('{f}', os.O_CREAT|os.O_RDWR|os.O_TRUNC, 0o666); print('opened')\n\
             except PermissionError: print('EACCES')"
        ))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let size = t
        .fstatat(Fd::AT_FDCWD, "/secret", AtFlags::empty())
        .unwrap()
        .st_size;
    drop(bg);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!((said.as_str(), size), ("EACCES", 10), "{out:?}");
}
