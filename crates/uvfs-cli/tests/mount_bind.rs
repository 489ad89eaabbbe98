//! `uvfs mount --bind HOST_DIR:PATH[:ro]` at paths inside the mount (issue 10's CLI): the
//! host directory's files at PATH (made if missing), changes reaching the host before the
//! call returns, `:ro` answering `EROFS`, the mount point busy, renames across the bind
//! `EXDEV` (which `mv` turns into a copy); and bad specs refused with one line, nothing
//! mounted. Expected values are Linux's for the same layout of bind mounts.

mod common;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::process::Command;

use common::{on_host_tmpfs, uvfs_only, MountGuard};

#[test]
fn binds_at_paths() {
    if !uvfs_only("binds_at_paths") {
        return;
    }
    on_host_tmpfs(|host| {
        fs::write(host.join("f"), b"host").unwrap();
        fs::create_dir(host.join("d")).unwrap();
        let rw = format!("{}:/srv/data/", host.display());
        let ro = format!("{}:/ro:ro", host.display());
        // A root of 8 MiB: unlike the host's tmpfs (statfs below tells them apart).
        let args = ["--bind", &rw, "--bind", &ro, "--size", "8m"];
        let Some(m) = MountGuard::mount("binds_at_paths", &args) else {
            return;
        };
        let p = m.path();
        assert_eq!(fs::read(p.join("srv/data/f")).unwrap(), b"host");
        // statfs under the bind is the host directory's file system (as a kernel bind
        // mount's), not the root tmpfs's. Bug (a fresh-user trial): `df` of a bound path
        // showed the root's; the server's STATFS ignored the node.
        let (under, host_fs) = (
            rustix::fs::statvfs(p.join("srv/data")).unwrap(),
            rustix::fs::statvfs(host).unwrap(),
        );
        assert_eq!(
            (under.f_blocks, under.f_bsize, under.f_files),
            (host_fs.f_blocks, host_fs.f_bsize, host_fs.f_files)
        );
        let root = rustix::fs::statvfs(p).unwrap();
        assert_eq!(root.f_blocks * root.f_bsize, 8 << 20, "the root's own");
        assert!(p.join("srv/data/d").is_dir());
        fs::write(p.join("srv/data/g"), b"new").unwrap();
        assert_eq!(
            fs::read(host.join("g")).unwrap(),
            b"new",
            "written through to the host"
        );
        assert_eq!(
            fs::read(p.join("ro/g")).unwrap(),
            b"new",
            "the other bind sees it"
        );
        let e = fs::write(p.join("ro/x"), b"x").unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            Some(rustix::io::Errno::ROFS.raw_os_error())
        );
        let e = fs::remove_dir(p.join("srv/data")).unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            Some(rustix::io::Errno::BUSY.raw_os_error())
        );
        let e = fs::rename(p.join("srv/data/g"), p.join("srv/g")).unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            Some(rustix::io::Errno::XDEV.raw_os_error())
        );
        // Two files of different file systems in one FUSE mount keep distinct inode numbers.
        fs::write(p.join("srv/t"), b"t").unwrap();
        let (a, b) = (
            fs::metadata(p.join("srv/t")).unwrap(),
            fs::metadata(p.join("srv/data/f")).unwrap(),
        );
        assert_ne!(a.ino(), b.ino());
        let names: Vec<String> = fs::read_dir(p.join("srv"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names.contains(&"data".to_owned()));
    });
}

/// `uvfs mount` with `args` on a scratch directory must fail with a message containing
/// `want`, and leave nothing mounted there.
fn refused(args: &[&str], want: &str) {
    let mp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_uvfs"))
        .arg("mount")
        .arg(mp.path())
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} was accepted");
    assert!(err.contains(want), "{args:?}: {err}");
    assert!(
        common::mount_at(mp.path()).is_none(),
        "{args:?} mounted something"
    );
}

#[test]
fn bad_bind_specs_are_refused() {
    if !uvfs_only("bad_bind_specs_are_refused") || common::uvfs_missing().is_some() {
        return;
    }
    on_host_tmpfs(|host| {
        fs::write(host.join("file"), b"x").unwrap();
        let h = host.display().to_string();
        refused(
            &["--bind", &format!("{h}:/a"), "--bind", &format!("{h}:/a/")],
            "bound twice",
        );
        refused(&["--bind", &format!("{h}:/a/../b")], "must not contain");
        refused(&["--bind", &format!("{h}:rel")], "must be absolute");
        refused(&["--bind", &format!("{h}/missing:/a")], "No such file");
        refused(&["--bind", &format!("{h}/file:/a")], "not a directory");
        // PATH under a file of the host directory bound at /.
        refused(
            &[
                "--bind",
                &format!("{h}:/"),
                "--bind",
                &format!("{h}:/file/sub"),
            ],
            "cannot make /file/sub",
        );
    });
}
