//! Host import and export (`Dir::import_host`, `Dir::export_host`): a host tree copied
//! into every file system behind the seam (tmpfs, hostfs) and back out must be the same
//! tree: types, bytes, holes, permission bits (set-ID and sticky included), owners (as
//! root), access and modification times to the nanosecond, symlink targets and hard-link
//! groups; and nothing existing is overwritten.

mod common;
use common::*;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::Path;
use uvfs::hosttree::{CopyError, CopyStats};

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn set_times(p: &Path, atime: (i64, i64), mtime: (i64, i64)) {
    use rustix::fs::{AtFlags, Timespec, Timestamps, CWD};
    let ts = |(s, n)| Timespec {
        tv_sec: s,
        tv_nsec: n,
    };
    rustix::fs::utimensat(
        CWD,
        p,
        &Timestamps {
            last_access: ts(atime),
            last_modification: ts(mtime),
        },
        AtFlags::SYMLINK_NOFOLLOW,
    )
    .unwrap();
}

/// A host tree with every kind of entry the copy keeps.
fn make_tree(root: &Path) {
    let p = |s: &str| root.join(s);
    fs::create_dir_all(p("a/b/c")).unwrap();
    fs::write(p("a/file"), b"hello").unwrap();
    fs::write(p("a/b/c/deep"), vec![7u8; 200_000]).unwrap();
    fs::write(p("empty"), b"").unwrap();
    // Sparse: 3 MiB with 5 bytes of data at 1 MiB.
    let f = fs::File::create(p("sparse")).unwrap();
    f.write_at(b"12345", 1 << 20).unwrap();
    f.set_len(3 << 20).unwrap();
    drop(f);
    // Hard links: three names of one file.
    fs::write(p("a/linked"), b"shared").unwrap();
    fs::hard_link(p("a/linked"), p("a/b/link2")).unwrap();
    fs::hard_link(p("a/linked"), p("link3")).unwrap();
    std::os::unix::fs::symlink("a/file", p("rel-link")).unwrap();
    std::os::unix::fs::symlink("/nowhere/at/all", p("dangling")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        p("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o640),
        0,
    )
    .unwrap();
    // Modes: set-ID, sticky, a read-only directory with contents.
    fs::write(p("a/suid"), b"#!/bin/sh\n").unwrap();
    fs::create_dir(p("sticky")).unwrap();
    fs::create_dir(p("ro")).unwrap();
    fs::write(p("ro/inside"), b"in a read-only dir").unwrap();
    if is_root() {
        std::os::unix::fs::lchown(p("a/file"), Some(1234), Some(5678)).unwrap();
        std::os::unix::fs::lchown(p("rel-link"), Some(4321), Some(8765)).unwrap();
        std::os::unix::fs::lchown(p("sticky"), Some(1000), Some(1000)).unwrap();
    }
    for (name, mode) in [
        ("a/suid", 0o6755),
        ("sticky", 0o1777),
        ("a/file", 0o640),
        ("ro", 0o555),
        ("a/b", 0o710),
    ] {
        fs::set_permissions(p(name), fs::Permissions::from_mode(mode)).unwrap();
    }
    // Times with nanoseconds (atimes within the last day, after the mtimes).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    for (i, name) in [
        "a/file",
        "a/b/c/deep",
        "sparse",
        "a/linked",
        "rel-link",
        "dangling",
        "fifo",
        "a/suid",
        "empty",
        "a/b/c",
        "a/b",
        "a",
        "sticky",
        "ro",
    ]
    .iter()
    .enumerate()
    {
        let i = i as i64;
        set_times(
            &p(name),
            (now - 3600 + i, 123_456_789),
            (1_600_000_000 + i, 987_654_321 - i),
        );
    }
}

/// Everything the copy promises to keep, by relative path; hard-link groups as the sorted
/// names sharing an inode.
#[derive(Debug, PartialEq)]
struct Entry {
    fmt: u32,
    mode: u32,
    owner: Option<(u32, u32)>,
    size: u64,
    atime: Option<(i64, i64)>,
    mtime: (i64, i64),
    /// Length and hash of the contents (not the bytes: a failure prints this).
    data: Option<(usize, u64)>,
    target: Option<std::path::PathBuf>,
    nlink: u64,
}

fn describe(root: &Path) -> (BTreeMap<String, Entry>, Vec<Vec<String>>) {
    let mut out = BTreeMap::new();
    let mut inodes: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut todo = vec![String::new()];
    while let Some(rel) = todo.pop() {
        for e in fs::read_dir(root.join(&rel)).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            let rp = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let m = fs::symlink_metadata(e.path()).unwrap();
            let fmt = m.mode() & 0o170000;
            let is_dir = m.is_dir();
            if is_dir {
                todo.push(rp.clone());
            }
            if m.is_file() {
                inodes.entry(m.ino()).or_default().push(rp.clone());
            }
            out.insert(
                rp,
                Entry {
                    fmt,
                    mode: m.mode() & 0o7777,
                    owner: is_root().then_some((m.uid(), m.gid())),
                    size: if is_dir { 0 } else { m.len() },
                    // A directory's atime changes when it is listed; files' and links' stay.
                    atime: (!is_dir).then_some((m.atime(), m.atime_nsec())),
                    mtime: (m.mtime(), m.mtime_nsec()),
                    // Read after every entry's attributes are taken (below): reading a
                    // hard-linked file under relatime may move its atime, which its other
                    // names would then show.
                    data: None,
                    target: m.is_symlink().then(|| fs::read_link(e.path()).unwrap()),
                    nlink: if is_dir { 0 } else { m.nlink() },
                },
            );
        }
    }
    for (rp, e) in out.iter_mut() {
        if e.fmt == 0o100000 {
            use std::hash::{Hash, Hasher};
            let b = fs::read(root.join(rp)).unwrap();
            let mut h = std::collections::hash_map::DefaultHasher::new();
            b.hash(&mut h);
            e.data = Some((b.len(), h.finish()));
        }
    }
    let mut groups: Vec<Vec<String>> = inodes
        .into_values()
        .filter(|v| v.len() > 1)
        .map(|mut v| {
            v.sort();
            v
        })
        .collect();
    groups.sort();
    (out, groups)
}

#[test]
fn import_then_export_gives_the_same_tree() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path());
    // Read once first: under relatime the host moves an atime older than the ctime (which
    // setting the times made "now") forward at the first read; after that, reads keep it.
    describe(src.path());
    let want = describe(src.path());
    assert_eq!(
        want.1,
        vec![vec![
            "a/b/link2".to_string(),
            "a/linked".into(),
            "link3".into()
        ]]
    );
    for u in each_fs() {
        let name = if u.host.is_some() { "hostfs" } else { "tmpfs" };
        let d = u.task.root_dir().unwrap();
        let st = d.import_host(src.path(), "imported/here").unwrap();
        assert_eq!(
            st,
            CopyStats {
                dirs: 6, // the destination (made with its parent) and the 5 directories
                files: 7,
                symlinks: 2,
                nodes: 1,
                hard_links: 2,
                // Holes not copied: the sparse file is one 4 KiB data page (SEEK_DATA and
                // SEEK_HOLE report pages), not 3 MiB.
                bytes: 5 + 200_000 + 4096 + 6 + 10 + 18,
                owners_not_kept: 0,
            },
            "on {name}"
        );
        // Seen through uvfs.
        let m = d.symlink_metadata("imported/here/a/suid").unwrap();
        assert_eq!(m.permissions().mode(), 0o6755, "on {name}");
        assert_eq!(
            m.stat().st_mtime,
            uvfs::Timespec::new(1_600_000_007, 987_654_314),
            "on {name}"
        );
        let sp = d.metadata("imported/here/sparse").unwrap();
        assert!(
            sp.stat().st_blocks * 512 < 1 << 20,
            "holes kept on {name}: {:?}",
            sp.stat()
        );
        // And back out.
        let out = tempfile::tempdir().unwrap();
        let dst = out.path().join("copy");
        let st2 = d.export_host("imported/here", &dst).unwrap();
        assert_eq!(st2.bytes, st.bytes, "on {name}");
        let got = describe(&dst);
        assert_eq!(got.1, want.1, "hard-link groups on {name}");
        for (k, w) in &want.0 {
            assert_eq!(got.0.get(k), Some(w), "{k} on {name}");
        }
        assert_eq!(got.0.len(), want.0.len(), "on {name}");
        let blocks = fs::metadata(dst.join("sparse")).unwrap().blocks();
        assert!(
            blocks * 512 < 1 << 20,
            "holes kept on the way out: {blocks} blocks"
        );
        let root_mode = fs::metadata(&dst).unwrap().mode() & 0o7777;
        assert_eq!(root_mode, fs::metadata(src.path()).unwrap().mode() & 0o7777);
        // (Read through uvfs only now: a read moves a copied atime, older than the copy's
        // ctime, under relatime, as on Linux.)
        assert_eq!(d.read("imported/here/sparse").unwrap().len(), 3 << 20);
        assert_eq!(
            d.read_link("imported/here/dangling").unwrap(),
            Path::new("/nowhere/at/all")
        );
    }
}

/// Nothing is overwritten: an existing name is EEXIST, the data there stays; a destination
/// that is not a directory is ENOTDIR; a non-root task keeps its own ownership and counts
/// what it could not keep.
#[test]
fn existing_names_are_refused_and_owners_counted() {
    let src = tempfile::tempdir().unwrap();
    fs::write(src.path().join("f"), b"new").unwrap();
    if is_root() {
        std::os::unix::fs::lchown(src.path().join("f"), Some(4242), Some(4242)).unwrap();
    }
    for u in each_fs() {
        let d = u.task.root_dir().unwrap();
        d.create_dir("dst").unwrap();
        d.write("dst/f", "old").unwrap();
        let e = d.import_host(src.path(), "dst").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(17));
        // The entry that failed is named, host source and uvfs destination (`cp`'s
        // message names it too).
        let named = (src.path().join("f"), Path::new("dst/f").to_path_buf());
        assert_eq!(e.entry.as_ref(), Some(&named));
        assert_eq!(
            e.to_string(),
            format!("copying {}/f to dst/f: {}", src.path().display(), e.error)
        );
        assert_eq!(d.read("dst/f").unwrap(), b"old");
        let e = d.import_host(src.path(), "dst/f").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(20));
        // An error about the roots names no entry.
        assert!(e.entry.is_none());
        let e = d.import_host(src.path().join("f"), "x").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(20));
        // Symlinks at the two roots are followed, as `cp -a host/. to` follows them; a
        // destination symlink leading out of the Dir is EXDEV.
        let hl = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(src.path(), hl.path().join("to-src")).unwrap();
        d.symlink("dst2", "via").unwrap();
        d.create_dir("dst2").unwrap();
        d.import_host(hl.path().join("to-src"), "via").unwrap();
        assert_eq!(d.read("dst2/f").unwrap(), b"new");
        d.symlink("/", "out").unwrap();
        let e = d
            .open_dir("dst2")
            .unwrap()
            .import_host(src.path(), "../out")
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(18));
        let out = tempfile::tempdir().unwrap();
        fs::write(out.path().join("f"), b"host").unwrap();
        let e = d.export_host("dst", out.path()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(17));
        let named = (Path::new("dst/f").to_path_buf(), out.path().join("f"));
        assert_eq!(e.entry.as_ref(), Some(&named));
        // Through io::Error (what a caller's `?` makes of it): same kind, the entry named.
        let io: std::io::Error = e.into();
        assert_eq!(io.kind(), std::io::ErrorKind::AlreadyExists);
        assert!(io.to_string().starts_with("copying dst/f to "), "{io}");
        let inner = io.get_ref().and_then(|i| i.downcast_ref::<CopyError>());
        assert_eq!(inner.and_then(CopyError::raw_os_error), Some(17));
        assert_eq!(fs::read(out.path().join("f")).unwrap(), b"host");
        if is_root() {
            // A non-root task: the copy is its own, and says how many owners it lost.
            d.create_dir("open").unwrap();
            d.set_permissions("open", uvfs::dir::Permissions::from_mode(0o777))
                .unwrap();
            let mut user = u.task.fork();
            user.set_cred(uvfs::Cred::new(1000, 1000, &[]));
            let ud = user.root_dir().unwrap();
            let st = ud.import_host(src.path(), "open/mine").unwrap();
            assert_eq!(st.owners_not_kept, 2, "the file and the directory itself");
            assert_eq!(ud.metadata("open/mine/f").unwrap().uid(), 1000);
        }
    }
}

/// An export into a host directory named through a symlink goes into the directory it
/// names, whose mode becomes the source's, the symlink left as it is: as `cp -a SRC/.
/// LINK` (measured: `real` 750, `link` still a symlink, `real/f` copied), also with the
/// symlink as a middle component of a new destination.
/// Bug: the copy went in, then setting the root's attributes without following the final
/// symlink failed with EOPNOTSUPP (`uvfs run --export /b:LINK` exited 125).
#[test]
fn export_follows_a_symlinked_destination() {
    for u in each_fs() {
        let name = if u.host.is_some() { "hostfs" } else { "tmpfs" };
        let d = u.task.root_dir().unwrap();
        d.create_dir("src").unwrap();
        d.set_permissions("src", uvfs::dir::Permissions::from_mode(0o750))
            .unwrap();
        d.write("src/f", "data").unwrap();
        let out = tempfile::tempdir().unwrap();
        fs::create_dir(out.path().join("real")).unwrap();
        std::os::unix::fs::symlink("real", out.path().join("link")).unwrap();
        let st = d.export_host("src", out.path().join("link")).unwrap();
        assert_eq!((st.files, st.dirs), (1, 0), "on {name}");
        assert_eq!(fs::read(out.path().join("real/f")).unwrap(), b"data");
        let real = fs::metadata(out.path().join("real")).unwrap();
        assert_eq!(real.mode() & 0o7777, 0o750, "on {name}");
        let link = fs::symlink_metadata(out.path().join("link")).unwrap();
        assert!(link.file_type().is_symlink(), "on {name}");
        // Through a symlink in the middle, to a directory made there.
        d.export_host("src", out.path().join("link/new")).unwrap();
        assert_eq!(fs::read(out.path().join("real/new/f")).unwrap(), b"data");
    }
}

/// What a tar round trip keeps: as [`describe`] without atimes and with whole-second
/// mtimes (ustar's), FIFOs kept.
#[cfg(feature = "tar")]
fn describe_tar(root: &Path) -> (BTreeMap<String, Entry>, Vec<Vec<String>>) {
    let (mut m, g) = describe(root);
    for e in m.values_mut() {
        e.atime = None;
        e.mtime.1 = 0;
    }
    (m, g)
}

/// Tar in and out: our archive of a tree unpacks with GNU tar to the same tree, GNU tar's
/// archive unpacks with ours to the same tree, and ours round-trips through uvfs.
#[cfg(feature = "tar")]
#[test]
fn tar_round_trips_and_matches_gnu_tar() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path());
    let want = describe_tar(src.path());
    let gnu = tempfile::tempdir().unwrap();
    let gnu_tar = gnu.path().join("gnu.tar");
    let st = std::process::Command::new("tar")
        .args(["--numeric-owner", "-C"])
        .arg(src.path())
        .arg("-cf")
        .arg(&gnu_tar)
        .arg(".")
        .status();
    let Ok(st) = st else {
        eprintln!("no tar(1) here: the GNU tar comparison is skipped");
        return;
    };
    assert!(st.success());
    for u in each_fs() {
        let name = if u.host.is_some() { "hostfs" } else { "tmpfs" };
        let d = u.task.root_dir().unwrap();
        // GNU tar's archive, unpacked by us.
        d.unpack_tar(fs::File::open(&gnu_tar).unwrap(), "from-gnu")
            .unwrap();
        // The archive's `./` gives the destination the root's attributes, as tar -x -p.
        let root_mode = fs::metadata(src.path()).unwrap().mode() & 0o7777;
        assert_eq!(
            d.metadata("from-gnu").unwrap().permissions().mode(),
            root_mode
        );
        let out = tempfile::tempdir().unwrap();
        d.export_host("from-gnu", out.path().join("x")).unwrap();
        let got = describe_tar(&out.path().join("x"));
        assert_eq!(got.1, want.1, "hard links from GNU tar on {name}");
        for (k, w) in &want.0 {
            assert_eq!(got.0.get(k), Some(w), "{k} from GNU tar on {name}");
        }
        assert_eq!(got.0.len(), want.0.len());
        // Ours, unpacked by GNU tar.
        let bytes = d.pack_tar("from-gnu", Vec::new()).unwrap();
        let ours = out.path().join("ours.tar");
        fs::write(&ours, &bytes).unwrap();
        let x2 = out.path().join("x2");
        fs::create_dir(&x2).unwrap();
        let st = std::process::Command::new("tar")
            .args(["--numeric-owner", "-p", "-C"])
            .arg(&x2)
            .arg("-xf")
            .arg(&ours)
            .status()
            .unwrap();
        assert!(st.success());
        let got = describe_tar(&x2);
        assert_eq!(got.1, want.1, "hard links through GNU tar on {name}");
        for (k, w) in &want.0 {
            assert_eq!(got.0.get(k), Some(w), "{k} through GNU tar on {name}");
        }
        // GNU tar's archive of nested files without directory entries: the parents are
        // made (review: it was ENOENT).
        let flat = out.path().join("flat.tar");
        let st = std::process::Command::new("tar")
            .arg("-C")
            .arg(src.path())
            .args(["--no-recursion", "-cf"])
            .arg(&flat)
            .args(["a/b/c/deep", "a/file"])
            .status()
            .unwrap();
        assert!(st.success());
        d.unpack_tar(fs::File::open(&flat).unwrap(), "flat")
            .unwrap();
        assert_eq!(d.read("flat/a/b/c/deep").unwrap(), vec![7u8; 200_000]);
        // Ours carries `./` too.
        let x3 = out.path().join("x3");
        fs::create_dir(&x3).unwrap();
        fs::set_permissions(&x3, fs::Permissions::from_mode(0o777)).unwrap();
        let st = std::process::Command::new("tar")
            .args(["-p", "-C"])
            .arg(&x3)
            .arg("-xf")
            .arg(&ours)
            .status()
            .unwrap();
        assert!(st.success());
        assert_eq!(fs::metadata(&x3).unwrap().mode() & 0o7777, root_mode);
        // Ours, unpacked by ours.
        let st2 = d.unpack_tar(&bytes[..], "again").unwrap();
        assert_eq!(
            (st2.files, st2.hard_links, st2.symlinks, st2.nodes),
            (7, 2, 2, 1)
        );
        assert_eq!(d.read("again/a/b/c/deep").unwrap(), vec![7u8; 200_000]);
    }
}

/// A hostile archive (an entry or a hard link leaving the destination) is refused with
/// `InvalidData` and writes nothing outside.
#[cfg(feature = "tar")]
#[test]
fn tar_entries_cannot_leave_the_destination() {
    fn archive(entries: &[(&str, tar::EntryType, &str)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (path, kind, link) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_mode(0o644);
            h.set_uid(0);
            h.set_gid(0);
            h.set_mtime(0);
            h.set_size(if *kind == tar::EntryType::Regular {
                3
            } else {
                0
            });
            // Written raw: the builder itself refuses `..` (a hostile archive would not).
            let name = path.as_bytes();
            h.as_old_mut().name[..name.len()].copy_from_slice(name);
            if !link.is_empty() {
                h.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
            }
            h.set_cksum();
            b.append(&h, &b"abc"[..h.size().unwrap() as usize]).unwrap();
        }
        b.into_inner().unwrap()
    }
    use tar::EntryType as E;
    for u in each_fs() {
        let d = u.task.root_dir().unwrap();
        d.create_dir("box").unwrap();
        d.write("secret", "keep").unwrap();
        for a in [
            archive(&[("../escaped", E::Regular, "")]),
            archive(&[("/abs", E::Regular, "")]),
            archive(&[("ok", E::Regular, ""), ("x/../../escaped", E::Regular, "")]),
            archive(&[("hl", E::Link, "../secret")]),
        ] {
            let e = d.unpack_tar(&a[..], "box/dst").unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidData, "{e}");
        }
        assert!(!d.try_exists("escaped").unwrap());
        assert!(!d.try_exists("abs").unwrap());
        assert_eq!(d.read("secret").unwrap(), b"keep");
        assert_eq!(d.metadata("secret").unwrap().nlink(), 1);
    }
}

/// The classic extraction attack: an archive makes a symlink `a -> /` (or `..`), then a
/// file or directory `a/x`, or a hard link through it. The entry's parent is opened without
/// following symlinks, so it is ELOOP and nothing appears outside the destination.
#[cfg(feature = "tar")]
#[test]
fn tar_cannot_write_through_its_own_symlinks() {
    use tar::EntryType as E;
    fn archive(entries: &[(&str, E, &str)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (path, kind, link) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_mode(0o755);
            h.set_uid(0);
            h.set_gid(0);
            h.set_mtime(0);
            h.set_size(if *kind == E::Regular { 3 } else { 0 });
            let size = h.size().unwrap() as usize;
            if link.is_empty() {
                b.append_data(&mut h, path, &b"abc"[..size]).unwrap();
            } else {
                b.append_link(&mut h, path, link).unwrap();
            }
        }
        b.into_inner().unwrap()
    }
    for u in each_fs() {
        let d = u.task.root_dir().unwrap();
        d.write("secret", "keep").unwrap();
        for (i, a) in [
            archive(&[("a", E::Symlink, "/"), ("a/x", E::Regular, "")]),
            archive(&[("a", E::Symlink, ".."), ("a/x", E::Directory, "")]),
            archive(&[("a", E::Symlink, "/"), ("a/b/c", E::Regular, "")]),
            archive(&[("a", E::Symlink, "/"), ("h", E::Link, "a/secret")]),
        ]
        .into_iter()
        .enumerate()
        {
            let to = format!("box{i}/dst");
            let e = d.unpack_tar(&a[..], &to).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(40), "archive {i}: {e}"); // ELOOP
            assert!(!d.try_exists("x").unwrap(), "archive {i}");
            assert!(!d.try_exists(format!("box{i}/x")).unwrap(), "archive {i}");
            assert!(
                !d.try_exists(format!("box{i}/dst/h")).unwrap(),
                "archive {i}"
            );
        }
        assert_eq!(d.read("secret").unwrap(), b"keep");
        assert_eq!(d.metadata("secret").unwrap().nlink(), 1);
    }
}

/// Levels of `d/` in [`deeper_than_path_max_round_trips`]: 4200 bytes of path to the
/// bottom directory, past `PATH_MAX` (4096).
const DEEP: usize = 2100;

/// The directory `depth` levels of `d` below the host directory `root`, opened one level at
/// a time (its path is too long for one `open`).
fn host_descend(root: &Path, depth: usize) -> rustix::fd::OwnedFd {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut fd = rustix::fs::open(root, flags, Mode::empty()).unwrap();
    for _ in 0..depth {
        fd = rustix::fs::openat(&fd, "d", flags, Mode::empty()).unwrap();
    }
    fd
}

/// How many levels of `d` lie below the host directory `root`.
fn host_depth(root: &Path) -> usize {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut fd = rustix::fs::open(root, flags, Mode::empty()).unwrap();
    let mut depth = 0;
    while let Ok(next) = rustix::fs::openat(&fd, "d", flags, Mode::empty()) {
        fd = next;
        depth += 1;
    }
    depth
}

/// A tree deeper than `PATH_MAX` copies in and out whole, as `cp -a` and `tar` copy it.
/// Bug: both walks joined whole paths (host `PathBuf`s, uvfs paths from the root), so past
/// 4096 bytes every call failed with ENAMETOOLONG and the copy stopped half done. Cause:
/// paths, not descriptors. Fix: each level is opened from its parent's descriptor and every
/// entry named relative to it, on both sides, a bounded window of levels held open.
#[test]
fn deeper_than_path_max_round_trips() {
    use rustix::fs::{Mode, OFlags};
    let src = tempfile::tempdir().unwrap();
    fs::write(src.path().join("top"), b"linked from the bottom").unwrap();
    {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut fd = rustix::fs::open(src.path(), flags, Mode::empty()).unwrap();
        for _ in 0..DEEP {
            rustix::fs::mkdirat(&fd, "d", Mode::from_raw_mode(0o755)).unwrap();
            fd = rustix::fs::openat(&fd, "d", flags, Mode::empty()).unwrap();
        }
        let w = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC;
        let f = rustix::fs::openat(&fd, "f", w, Mode::from_raw_mode(0o640)).unwrap();
        rustix::io::write(&f, b"at the bottom").unwrap();
        rustix::fs::symlinkat("f", &fd, "l").unwrap();
        let top = rustix::fs::open(src.path(), flags, Mode::empty()).unwrap();
        rustix::fs::linkat(&top, "top", &fd, "hl", rustix::fs::AtFlags::empty()).unwrap();
    }
    // The middle directory read-only (its contents go in first, its mode after).
    let mid = host_descend(src.path(), DEEP / 2);
    rustix::fs::fchmod(&mid, Mode::from_raw_mode(0o555)).unwrap();
    drop(mid);
    for u in each_fs() {
        let name = if u.host.is_some() { "hostfs" } else { "tmpfs" };
        // Descriptors stay bounded at any depth: 100 are enough for 2100 levels.
        u.task.setrlimit_nofile(100).unwrap();
        let d = u.task.root_dir().unwrap();
        let st = d.import_host(src.path(), "in").unwrap();
        assert_eq!(
            (st.dirs, st.files, st.symlinks, st.hard_links),
            (DEEP as u64 + 1, 2, 1, 1),
            "on {name}"
        );
        let out = tempfile::tempdir().unwrap();
        let dst = out.path().join("copy");
        let st2 = d.export_host("in", &dst).unwrap();
        assert_eq!(st2, st, "on {name}");
        assert_eq!(host_depth(&dst), DEEP, "on {name}");
        let bottom = host_descend(&dst, DEEP);
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let f = rustix::fs::openat(&bottom, "f", flags, Mode::empty()).unwrap();
        let mut buf = [0u8; 64];
        let n = rustix::io::read(&f, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"at the bottom", "on {name}");
        assert_eq!(rustix::fs::fstat(&f).unwrap().st_mode & 0o7777, 0o640);
        let target = rustix::fs::readlinkat(&bottom, "l", Vec::new()).unwrap();
        assert_eq!(target.as_bytes(), b"f", "on {name}");
        // The bottom's hard link is the top file's inode in the copy too.
        let hl = rustix::fs::statat(&bottom, "hl", rustix::fs::AtFlags::empty()).unwrap();
        let top = fs::metadata(dst.join("top")).unwrap();
        assert_eq!((hl.st_ino, hl.st_nlink), (top.ino(), 2), "on {name}");
        let mid = host_descend(&dst, DEEP / 2);
        let mode = rustix::fs::fstat(&mid).unwrap().st_mode & 0o7777;
        assert_eq!(mode, 0o555, "on {name}");
        // Let the temporary directories go (a read-only directory in the middle of each).
        rustix::fs::fchmod(&mid, Mode::from_raw_mode(0o755)).unwrap();
    }
    let mid = host_descend(src.path(), DEEP / 2);
    rustix::fs::fchmod(&mid, Mode::from_raw_mode(0o755)).unwrap();
}

/// A hard link whose first copy lies in a directory the walk has already finished, that
/// directory's mode giving its (non-root) owner no search permission: the link must still
/// be made (before 0306f5e every directory stayed 0700 until the whole tree was in, so this
/// worked; since then a finished directory gets its final mode at once and the later
/// `linkat` through it is EACCES). Review of 0306f5e.
#[test]
fn hard_link_into_a_finished_unsearchable_directory() {
    if !is_root() {
        return;
    }
    let src = tempfile::tempdir().unwrap();
    let p = |s: &str| src.path().join(s);
    // Whichever of a and b the host lists first, the other's link goes back into it.
    fs::create_dir_all(p("a/sub")).unwrap();
    fs::create_dir_all(p("b/sub")).unwrap();
    fs::write(p("a/sub/f"), b"shared").unwrap();
    fs::hard_link(p("a/sub/f"), p("b/sub/f")).unwrap();
    set_times(&p("a/sub"), (1_000_000, 5), (2_000_000, 7));
    set_times(&p("b/sub"), (1_000_001, 5), (2_000_001, 7));
    fs::set_permissions(p("a/sub"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::set_permissions(p("b/sub"), fs::Permissions::from_mode(0o600)).unwrap();
    for u in each_fs() {
        let name = if u.host.is_some() { "hostfs" } else { "tmpfs" };
        let d = u.task.root_dir().unwrap();
        d.create_dir("open").unwrap();
        d.set_permissions("open", uvfs::dir::Permissions::from_mode(0o777))
            .unwrap();
        // The host side is read as root (the process); the uvfs side is a user's.
        let mut user = u.task.fork();
        user.set_cred(uvfs::Cred::new(1000, 1000, &[]));
        let ud = user.root_dir().unwrap();
        let r = ud.import_host(src.path(), "open/mine");
        let st = r.unwrap_or_else(|e| panic!("import on {name}: {e}"));
        assert_eq!((st.files, st.hard_links), (1, 1), "on {name}");
        // The same tree (read by root: the user cannot look inside 0600): both
        // directories 0600 with their times, one inode with two names.
        for (sub, secs) in [("a/sub", 1_000_000), ("b/sub", 1_000_001)] {
            let m = d.symlink_metadata(format!("open/mine/{sub}")).unwrap();
            assert_eq!(m.mode() & 0o7777, 0o600, "{sub} on {name}");
            let (at, mt) = (m.stat().st_atime, m.stat().st_mtime);
            // A host directory's atime moves when it is listed (relatime), as in
            // `describe`; tmpfs keeps the one set.
            if u.host.is_none() {
                assert_eq!((at.tv_sec, at.tv_nsec), (secs, 5), "{sub} on {name}");
            }
            assert_eq!(
                (mt.tv_sec, mt.tv_nsec),
                (secs + 1_000_000, 7),
                "{sub} on {name}"
            );
        }
        let fa = d.symlink_metadata("open/mine/a/sub/f").unwrap();
        let fb = d.symlink_metadata("open/mine/b/sub/f").unwrap();
        assert_eq!((fa.ino(), fa.nlink()), (fb.ino(), 2), "on {name}");
        assert_eq!(d.read("open/mine/b/sub/f").unwrap(), b"shared");
    }
    fs::set_permissions(p("a/sub"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(p("b/sub"), fs::Permissions::from_mode(0o755)).unwrap();
}

/// A source root that exists but cannot be read is named in the error, as an entry below
/// it would be (before 0306f5e the listing of the root named it; since then opening it
/// failed without a name). Review of 0306f5e. The host side is read as the process (root
/// here), so the uvfs side of an export shows it.
#[test]
fn an_unreadable_source_root_is_named() {
    if !is_root() {
        return;
    }
    for u in each_fs() {
        let d = u.task.root_dir().unwrap();
        d.create_dir("open").unwrap();
        d.set_permissions("open", uvfs::dir::Permissions::from_mode(0o777))
            .unwrap();
        let mut user = u.task.fork();
        user.set_cred(uvfs::Cred::new(1000, 1000, &[]));
        let ud = user.root_dir().unwrap();
        ud.create_dir("open/shut").unwrap();
        ud.set_permissions("open/shut", uvfs::dir::Permissions::from_mode(0o300))
            .unwrap();
        let out = tempfile::tempdir().unwrap();
        let e = ud
            .export_host("open/shut", out.path().join("o"))
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(13), "{e}");
        let named = (Path::new("open/shut").to_path_buf(), out.path().join("o"));
        assert_eq!(e.entry.as_ref(), Some(&named));
        // A missing root is still an error about the roots.
        let e = ud
            .export_host("open/none", out.path().join("o"))
            .unwrap_err();
        assert!(e.entry.is_none(), "{e}");
    }
}
