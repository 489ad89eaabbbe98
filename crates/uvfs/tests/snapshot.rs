//! tmpfs snapshots (`uvfs::tmpfs::snapshot`, `Dir::snapshot`): a snapshot is the tree as
//! `cp -a` into a fresh tmpfs would make it (every attribute, holes, hard links, inode
//! numbers, getdents order), writes on either side are never seen on the other, and the
//! space accounting is a copy's.
//!
//! The expectations are those of a copy: what `stat`, `read`, `readlink`, `getxattr`,
//! `lseek(SEEK_DATA/SEEK_HOLE)` and `getdents` give on the source at the instant of the
//! snapshot. Snapshots are tmpfs's (the data lives in uvfs); on hostfs they are refused
//! with `EOPNOTSUPP`, which is checked too.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use uvfs::types::{SEEK_DATA, SEEK_HOLE, SEEK_SET, S_IFCHR, S_IFIFO};
use uvfs::{tmpfs, AtFlags, Errno, Fd, Mount, OpenFlags, RenameFlags, Stat, Task, Timespec};

const CWD: Fd = Fd::AT_FDCWD;
const NOFOLLOW: AtFlags = AtFlags::SYMLINK_NOFOLLOW;

/// Everything a copy keeps about one name: the stat (without the device), the data
/// (contents of a file, target of a symlink), the extended attributes, and a regular
/// file's data/hole map.
#[derive(Debug, PartialEq, Eq, Clone)]
struct Entry {
    path: String,
    st: Stat,
    data: Vec<u8>,
    xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    extents: Vec<i64>,
}

/// A copy's view of the tree of `t` from `/`, in getdents order (depth first).
fn dump(t: &Task) -> Vec<Entry> {
    let mut out = vec![entry(t, "/")];
    let mut todo = vec!["/".to_string()];
    while let Some(dir) = todo.pop() {
        let root = t.root_dir().unwrap();
        let d = root
            .open_dir(if dir == "/" { "." } else { &dir[1..] })
            .unwrap();
        let mut subdirs = vec![];
        for e in d.entries().unwrap() {
            let e = e.unwrap();
            let path = format!(
                "{}/{}",
                dir.trim_end_matches('/'),
                e.file_name().to_str().unwrap()
            );
            let en = entry(t, &path);
            if en.st.st_mode & 0o170000 == 0o040000 {
                subdirs.push(path);
            }
            out.push(en);
        }
        // Depth first, the first entry's subtree first.
        todo.extend(subdirs.into_iter().rev());
    }
    out
}

fn entry(t: &Task, path: &str) -> Entry {
    let mut st = t.fstatat(CWD, path, NOFOLLOW).unwrap();
    st.st_dev = 0;
    let kind = st.st_mode & 0o170000;
    let mut data = vec![];
    let mut extents = vec![];
    if kind == 0o100000 {
        let fd = t.openat(CWD, path, OpenFlags::RDONLY, 0).unwrap();
        data = vec![0; st.st_size as usize];
        assert_eq!(t.pread(fd, &mut data, 0).unwrap(), data.len());
        let mut off = 0;
        while off < st.st_size {
            let Ok(d) = t.lseek(fd, off, SEEK_DATA) else {
                break;
            };
            let h = t.lseek(fd, d, SEEK_HOLE).unwrap();
            extents.extend([d, h]);
            off = h;
        }
        t.close(fd).unwrap();
    } else if kind == 0o120000 {
        data = vec![0; 4096];
        let n = t.readlinkat(CWD, path, &mut data).unwrap();
        data.truncate(n);
    }
    let mut xattrs = vec![];
    if kind != 0o120000 {
        let mut names = vec![0; 4096];
        let n = t.listxattr(path, &mut names).unwrap();
        for name in names[..n].split(|&b| b == 0).filter(|n| !n.is_empty()) {
            let mut v = vec![0; 4096];
            let m = t.getxattr(path, name, &mut v).unwrap();
            xattrs.push((name.to_vec(), v[..m].to_vec()));
        }
    }
    Entry {
        path: path.to_string(),
        st,
        data,
        xattrs,
        extents,
    }
}

/// Times in the future for atime (so reading and listing never move it: relatime only
/// updates an atime at or before mtime/ctime or a day old) and distinct past mtimes.
fn fix_times(t: &Task, paths: &[&str]) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    for (i, p) in paths.iter().enumerate() {
        let times = [
            Timespec {
                tv_sec: now + 86_400,
                tv_nsec: 100 + i as i64,
            },
            Timespec {
                tv_sec: now - 1000 - i as i64,
                tv_nsec: 7 + i as i64,
            },
        ];
        t.utimensat(CWD, *p, Some(&times), NOFOLLOW).unwrap();
    }
}

/// A tree with every kind of inode and attribute a copy must keep.
fn build(t: &Task) {
    let r = t.root_dir().unwrap();
    r.create_dir_all("d/sub/deep").unwrap();
    r.write("d/f1", "hello").unwrap();
    r.write("d/sub/deep/file", vec![b'z'; 10_000]).unwrap();
    r.write("d/empty", "").unwrap();
    let big: Vec<u8> = (0..3 * 4096).map(|i| (i % 251) as u8).collect();
    r.write("d/big", &big).unwrap();
    // A sparse file: pages 0 and 256, a hole between, size 1 MiB + 1.
    let fd = t
        .openat(
            CWD,
            "/d/sparse",
            OpenFlags::CREAT | OpenFlags::WRONLY,
            0o600,
        )
        .unwrap();
    t.pwrite(fd, b"y", 0).unwrap();
    t.pwrite(fd, b"x", 1 << 20).unwrap();
    t.close(fd).unwrap();
    r.symlink("f1", "d/link").unwrap();
    r.symlink("a".repeat(200), "d/longlink").unwrap();
    t.mknodat(CWD, "/d/fifo", S_IFIFO | 0o640, 0).unwrap();
    t.mknodat(CWD, "/d/chr", S_IFCHR | 0o600, (1 << 8) | 3)
        .unwrap();
    r.hard_link("d/f1", &r, "d/sub/f1-again").unwrap();
    r.hard_link("d/big", &r, "outside-link").unwrap();
    t.fchmodat(CWD, "/d/f1", 0o4755, AtFlags::empty()).unwrap();
    t.fchmodat(CWD, "/d", 0o750, AtFlags::empty()).unwrap();
    t.fchownat(CWD, "/d/f1", 1000, 100, AtFlags::empty())
        .unwrap();
    t.fchownat(CWD, "/d/sub", 1001, 101, AtFlags::empty())
        .unwrap();
    t.fchownat(CWD, "/d/link", 1002, 102, NOFOLLOW).unwrap();
    t.setxattr("/d/f1", "user.k", b"v", 0).unwrap();
    t.setxattr("/d", "user.dir", b"", 0).unwrap();
    t.setxattr("/d/sub", "trusted.x", &[0, 1, 2], 0).unwrap();
    fix_times(
        t,
        &[
            "/",
            "/d",
            "/d/sub",
            "/d/sub/deep",
            "/d/sub/deep/file",
            "/d/f1",
            "/d/empty",
            "/d/big",
            "/d/sparse",
            "/d/link",
            "/d/longlink",
            "/d/fifo",
            "/d/chr",
        ],
    );
}

fn fresh() -> (Arc<Mount>, Task) {
    let m = tmpfs::mount(Default::default());
    let t = Task::init(&m);
    build(&t);
    (m, t)
}

#[test]
fn whole_mount_snapshot_is_a_copy() {
    let (a, ta) = fresh();
    let before = dump(&ta);
    let b = tmpfs::snapshot(&a).unwrap();
    let tb = Task::init(&b);
    assert_eq!(dump(&tb), before, "the snapshot is the tree as it was");
    assert_eq!(dump(&ta), before, "the source is unchanged");
    let (sa, sb) = (
        ta.fstatat(CWD, "/", AtFlags::empty()).unwrap(),
        tb.fstatat(CWD, "/", AtFlags::empty()).unwrap(),
    );
    assert_ne!(sa.st_dev, sb.st_dev, "another file system");
    assert_eq!(sb.st_ino, 1);
    // Hard links are one inode in the snapshot too.
    let f1 = tb.fstatat(CWD, "/d/f1", AtFlags::empty()).unwrap();
    let again = tb
        .fstatat(CWD, "/d/sub/f1-again", AtFlags::empty())
        .unwrap();
    assert_eq!((f1.st_ino, f1.st_nlink), (again.st_ino, 2));
    tb.pwrite(
        tb.openat(CWD, "/d/f1", OpenFlags::WRONLY, 0).unwrap(),
        b"J",
        0,
    )
    .unwrap();
    assert_eq!(
        tb.root_dir().unwrap().read("d/sub/f1-again").unwrap(),
        b"Jello"
    );
    assert_eq!(
        ta.root_dir().unwrap().read("d/sub/f1-again").unwrap(),
        b"hello"
    );
}

#[test]
fn subtree_snapshot_roots_at_the_directory() {
    let (_a, ta) = fresh();
    let src = ta.fstatat(CWD, "/d", AtFlags::empty()).unwrap();
    let c = ta
        .root_dir()
        .unwrap()
        .open_dir("d")
        .unwrap()
        .snapshot()
        .unwrap();
    let tc = Task::init(&c);
    let root = tc.fstatat(CWD, "/", AtFlags::empty()).unwrap();
    assert_eq!(root.st_ino, 1);
    assert_eq!(
        (
            root.st_mode,
            root.st_uid,
            root.st_gid,
            root.st_nlink,
            root.st_size
        ),
        (
            src.st_mode,
            src.st_uid,
            src.st_gid,
            src.st_nlink,
            src.st_size
        )
    );
    assert_eq!(
        (root.st_atime, root.st_mtime, root.st_ctime),
        (src.st_atime, src.st_mtime, src.st_ctime)
    );
    // `..` at the snapshot's root is the root.
    assert_eq!(tc.fstatat(CWD, "/..", AtFlags::empty()).unwrap().st_ino, 1);
    // The name outside the subtree is not part of the snapshot: one link left.
    let big = tc.fstatat(CWD, "/big", AtFlags::empty()).unwrap();
    assert_eq!(big.st_nlink, 1);
    assert_eq!(
        ta.fstatat(CWD, "/d/big", AtFlags::empty())
            .unwrap()
            .st_nlink,
        2
    );
    // Every entry below the root is the source's, paths re-rooted, link counts aside.
    let want: Vec<Entry> = dump(&ta)
        .into_iter()
        .filter_map(|mut e| {
            let p = e.path.strip_prefix("/d/")?.to_string();
            e.path = format!("/{p}");
            if e.path == "/big" {
                e.st.st_nlink = 1;
            }
            Some(e)
        })
        .collect();
    assert_eq!(dump(&tc)[1..], want[..]);
}

/// A change made on one side; the other must not see it.
type Change = fn(&Task);

const CHANGES: &[(&str, Change)] = &[
    ("pwrite into a shared page", |t| {
        let fd = t.openat(CWD, "/d/big", OpenFlags::WRONLY, 0).unwrap();
        t.pwrite(fd, b"CHANGED", 4096 + 10).unwrap();
    }),
    ("append", |t| {
        let fd = t
            .openat(CWD, "/d/f1", OpenFlags::WRONLY | OpenFlags::APPEND, 0)
            .unwrap();
        t.write(fd, b" world").unwrap();
    }),
    ("write through the other hard link", |t| {
        let fd = t
            .openat(CWD, "/d/sub/f1-again", OpenFlags::WRONLY, 0)
            .unwrap();
        t.pwrite(fd, b"HE", 0).unwrap();
    }),
    ("truncate into a shared page, then extend", |t| {
        let fd = t.openat(CWD, "/d/big", OpenFlags::WRONLY, 0).unwrap();
        t.ftruncate(fd, 5000).unwrap();
        t.ftruncate(fd, 3 * 4096).unwrap();
    }),
    ("punch a hole across pages", |t| {
        let fd = t.openat(CWD, "/d/big", OpenFlags::WRONLY, 0).unwrap();
        // FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
        t.fallocate(fd, 0x02 | 0x01, 100, 8000).unwrap();
    }),
    ("fallocate the sparse file's hole", |t| {
        let fd = t.openat(CWD, "/d/sparse", OpenFlags::WRONLY, 0).unwrap();
        t.fallocate(fd, 0, 0, 1 << 20).unwrap();
    }),
    ("write into a hole", |t| {
        let fd = t.openat(CWD, "/d/sparse", OpenFlags::WRONLY, 0).unwrap();
        t.pwrite(fd, b"hole", 40_000).unwrap();
    }),
    ("unlink", |t| {
        t.unlinkat(CWD, "/d/f1", AtFlags::empty()).unwrap()
    }),
    ("rename across directories", |t| {
        t.renameat2(CWD, "/d/big", CWD, "/d/sub/deep/big", RenameFlags::empty())
            .unwrap()
    }),
    ("mkdir and create", |t| {
        t.mkdirat(CWD, "/d/new", 0o755).unwrap();
        t.root_dir().unwrap().write("d/new/x", "x").unwrap();
    }),
    ("rmdir after emptying", |t| {
        t.unlinkat(CWD, "/d/sub/deep/file", AtFlags::empty())
            .unwrap();
        t.unlinkat(CWD, "/d/sub/deep", AtFlags::REMOVEDIR).unwrap();
    }),
    ("chmod, chown, utimens", |t| {
        t.fchmodat(CWD, "/d/empty", 0o600, AtFlags::empty())
            .unwrap();
        t.fchownat(CWD, "/d/sub", 5, 5, AtFlags::empty()).unwrap();
        t.utimensat(CWD, "/d/sparse", None, AtFlags::empty())
            .unwrap();
    }),
    ("setxattr and removexattr", |t| {
        t.setxattr("/d/f1", "user.k", b"other", 0).unwrap();
        t.removexattr("/d", "user.dir").unwrap();
    }),
];

#[test]
fn changes_are_never_seen_on_the_other_side() {
    for (name, change) in CHANGES {
        for snapshot_side in [false, true] {
            let (a, ta) = fresh();
            let before = dump(&ta);
            let b = tmpfs::snapshot(&a).unwrap();
            let tb = Task::init(&b);
            let (changed, other) = if snapshot_side {
                (&tb, &ta)
            } else {
                (&ta, &tb)
            };
            change(changed);
            let who = if snapshot_side { "snapshot" } else { "source" };
            assert_ne!(dump(changed), before, "{name} on the {who} changed it");
            assert_eq!(
                dump(other),
                before,
                "{name} on the {who} is not seen on the other side"
            );
        }
    }
}

#[test]
fn snapshot_outlives_its_source_and_chains() {
    let (a, ta) = fresh();
    let before = dump(&ta);
    let b = tmpfs::snapshot(&a).unwrap();
    let c = tmpfs::snapshot(&b).unwrap();
    drop(ta);
    drop(a);
    let (tb, tc) = (Task::init(&b), Task::init(&c));
    assert_eq!(dump(&tb), before);
    CHANGES[0].1(&tc);
    assert_eq!(dump(&tb), before);
    assert_ne!(dump(&tc), before);
    drop(tb);
    drop(b);
    let got = tc.root_dir().unwrap().read("d/big").unwrap();
    assert_eq!(&got[4096 + 10..4096 + 17], b"CHANGED");
    assert_eq!(
        got[0..10],
        before.iter().find(|e| e.path == "/d/big").unwrap().data[0..10]
    );
}

#[test]
fn space_is_accounted_as_for_a_copy() {
    let a = tmpfs::mount(tmpfs::TmpfsOptions {
        size: Some(256 * 4096),
        nr_inodes: Some(50),
        ..Default::default()
    });
    let ta = Task::init(&a);
    let r = ta.root_dir().unwrap();
    r.write("f", vec![7u8; 100 * 4096]).unwrap();
    r.hard_link("f", &r, "f2").unwrap();
    r.create_dir("d").unwrap();
    r.symlink("x".repeat(300), "long").unwrap();
    let sa = ta.statfs("/").unwrap();
    assert_eq!(
        sa.f_blocks - sa.f_bfree,
        101,
        "100 pages and the long symlink's"
    );
    let b = tmpfs::snapshot(&a).unwrap();
    let tb = Task::init(&b);
    let sb = tb.statfs("/").unwrap();
    assert_eq!(
        (sb.f_blocks, sb.f_bfree, sb.f_files, sb.f_ffree),
        (sa.f_blocks, sa.f_bfree, sa.f_files, sa.f_ffree),
        "the snapshot holds what the source holds"
    );
    // A write to a shared page is charged nothing new; the source is unchanged.
    let fd = tb.openat(CWD, "/f", OpenFlags::WRONLY, 0).unwrap();
    tb.pwrite(fd, b"new", 4096 * 50).unwrap();
    assert_eq!(tb.statfs("/").unwrap().f_bfree, sb.f_bfree);
    assert_eq!(ta.statfs("/").unwrap().f_bfree, sa.f_bfree);
    // Each side has its own 155 free pages.
    let fill = |t: &Task, name: &str| {
        let fd = t
            .openat(CWD, name, OpenFlags::CREAT | OpenFlags::WRONLY, 0o600)
            .unwrap();
        let mut n = 0;
        while t.write(fd, &[1u8; 4096]).is_ok() {
            n += 1;
        }
        n
    };
    assert_eq!(fill(&tb, "/fill"), 155);
    assert_eq!(fill(&ta, "/fill"), 155);
    // Freeing on one side gives that side its space back; the other keeps the data.
    ta.unlinkat(CWD, "/f", AtFlags::empty()).unwrap();
    ta.unlinkat(CWD, "/f2", AtFlags::empty()).unwrap();
    assert_eq!(ta.statfs("/").unwrap().f_bfree, 100);
    let got = tb.root_dir().unwrap().read("f2").unwrap();
    assert_eq!(got.len(), 100 * 4096);
    assert!(got[..4096 * 50].iter().all(|&b| b == 7));
    assert_eq!(&got[4096 * 50..4096 * 50 + 3], b"new");
}

#[test]
fn refused_off_tmpfs_and_for_a_removed_directory() {
    let host = tempfile::tempdir().unwrap();
    let h = uvfs::hostfs::mount(host.path(), Default::default()).unwrap();
    assert_eq!(tmpfs::snapshot(&h).unwrap_err(), Errno::EOPNOTSUPP);
    let th = Task::init(&h);
    let err = th.root_dir().unwrap().snapshot().unwrap_err();
    assert_eq!(err.raw_os_error(), Some(Errno::EOPNOTSUPP.raw()));
    let (_a, ta) = fresh();
    let r = ta.root_dir().unwrap();
    r.create_dir("gone").unwrap();
    let gone = r.open_dir("gone").unwrap();
    r.remove_dir("gone").unwrap();
    assert_eq!(
        gone.snapshot().unwrap_err().raw_os_error(),
        Some(Errno::ENOENT.raw())
    );
}

#[test]
fn each_file_is_taken_at_one_instant_under_concurrent_writes() {
    let (a, ta) = fresh();
    let fd = ta
        .openat(CWD, "/w", OpenFlags::CREAT | OpenFlags::RDWR, 0o600)
        .unwrap();
    ta.pwrite(fd, &[0u8; 4 * 4096], 0).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let writer = ta.clone_thread();
        let stop = &stop;
        s.spawn(move || {
            let mut k = 1u8;
            // Relaxed: a stop flag; the scope's join orders everything after it.
            while !stop.load(Ordering::Relaxed) {
                writer.pwrite(fd, &[k; 4 * 4096], 0).unwrap();
                k = k.wrapping_add(1);
            }
        });
        for _ in 0..200 {
            let b = tmpfs::snapshot(&a).unwrap();
            let got = Task::init(&b).root_dir().unwrap().read("w").unwrap();
            assert_eq!(got.len(), 4 * 4096);
            assert!(
                got.iter().all(|&x| x == got[0]),
                "one write's bytes, not a mix"
            );
        }
        // Relaxed: see the writer's load.
        stop.store(true, Ordering::Relaxed);
    });
    let mut buf = [0u8; 1];
    assert_eq!(ta.lseek(fd, 0, SEEK_SET).unwrap(), 0);
    assert_eq!(ta.read(fd, &mut buf).unwrap(), 1);
}

#[test]
fn a_snapshot_mounts_in_a_namespace() {
    let (a, ta) = fresh();
    let b = tmpfs::snapshot(&a).unwrap();
    ta.mkdirat(CWD, "/mnt", 0o755).unwrap();
    ta.mount(&b, "/mnt", uvfs::MountFlags::empty()).unwrap();
    assert_eq!(ta.root_dir().unwrap().read("mnt/d/f1").unwrap(), b"hello");
    ta.root_dir().unwrap().write("mnt/d/f1", "bye").unwrap();
    assert_eq!(ta.root_dir().unwrap().read("d/f1").unwrap(), b"hello");
    // The mount point itself was empty when the snapshot was taken.
    let c = tmpfs::snapshot(&a).unwrap();
    assert!(Task::init(&c)
        .root_dir()
        .unwrap()
        .read_dir("mnt")
        .unwrap()
        .next()
        .is_none());
}

/// Every inode of snapshot task `t`: `(ino, names, stat)`, with a check that directories
/// have one name.
fn inodes(t: &Task) -> std::collections::HashMap<u64, (u32, Stat)> {
    let mut m: std::collections::HashMap<u64, (u32, Stat)> = Default::default();
    let root = t.root_dir().unwrap();
    let mut todo = vec![String::new()];
    while let Some(dir) = todo.pop() {
        let d = if dir.is_empty() {
            root.open_dir(".")
        } else {
            root.open_dir(&dir)
        }
        .unwrap();
        for e in d.entries().unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_str().unwrap().to_string();
            let path = if dir.is_empty() {
                name.to_string()
            } else {
                format!("{dir}/{name}")
            };
            let st = t
                .fstatat(CWD, format!("/{path}").as_str(), NOFOLLOW)
                .unwrap();
            let is_dir = st.st_mode & 0o170000 == 0o040000;
            let n = m.entry(st.st_ino).or_insert((0, st));
            n.0 += 1;
            assert!(!is_dir || n.0 == 1, "{path}: a directory's number twice");
            if is_dir {
                todo.push(path);
            }
        }
    }
    m
}

/// Snapshots taken while another thread creates files (new inode-number batches), moves
/// files and directories across directories and replaces directories by rename: in each,
/// inode numbers are unique (names sharing one are hard links, their count the link
/// count), every directory's link count is 2 + its subdirectories, and the snapshot's own
/// new files get numbers no copied file has.
#[test]
fn consistent_under_a_changing_source() {
    let m = tmpfs::mount(Default::default());
    let t = Task::init(&m);
    for d in ["/a", "/b", "/d", "/z"] {
        t.mkdirat(CWD, d, 0o755).unwrap();
    }
    /// Stops the writer however the test thread leaves the scope (a failed assertion
    /// too), so that the scope's join does not wait for it forever.
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            // Relaxed: see the writer's load.
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = AtomicBool::new(false);
    let done = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        let w = t.fork();
        let (stop, done) = (&stop, &done);
        let _stop = StopOnDrop(stop);
        s.spawn(move || {
            let mut i = 0u64;
            // Relaxed: a stop flag; the scope's join orders the rest.
            while !stop.load(Ordering::Relaxed) {
                // The tree stays small: the files of 64 rounds ago go.
                if i >= 64 {
                    for dir in ["/a", "/z"] {
                        let _ = w.unlinkat(
                            CWD,
                            format!("{dir}/n{}", i - 64).as_str(),
                            AtFlags::empty(),
                        );
                    }
                }
                // A new batch of numbers every 1024 creates (per thread).
                for dir in ["/a", "/z"] {
                    let p = format!("{dir}/n{i}");
                    w.close(
                        w.openat(CWD, p.as_str(), OpenFlags::CREAT | OpenFlags::WRONLY, 0o600)
                            .unwrap(),
                    )
                    .unwrap();
                }
                let _ = w.mkdirat(CWD, "/d/x", 0o755);
                let _ = w.renameat2(CWD, "/d/x", CWD, "/d/y", RenameFlags::empty());
                let (from, to) = if i.is_multiple_of(2) {
                    ("/a/m", "/z/m")
                } else {
                    ("/z/m", "/a/m")
                };
                let _ = w.mkdirat(CWD, from, 0o755);
                let _ = w.renameat2(CWD, from, CWD, to, RenameFlags::empty());
                let f = format!("/a/n{i}");
                let _ = w.renameat2(CWD, f.as_str(), CWD, "/b/moved", RenameFlags::empty());
                i += 1;
                // Relaxed: a progress count for the loop below.
                done.store(i, Ordering::Relaxed);
            }
        });
        // Until the writer has taken several inode-number batches (1024 creates each) while
        // snapshots were being taken, and at least 60 snapshots.
        let mut round = 0;
        // Relaxed: a progress count.
        while round < 60 || (done.load(Ordering::Relaxed) < 20_000 && round < 20_000) {
            round += 1;
            let snap = tmpfs::snapshot(&m).unwrap();
            let st = Task::init(&snap);
            let all = inodes(&st);
            for (ino, (names, s)) in &all {
                if s.st_mode & 0o170000 == 0o040000 {
                    continue;
                }
                assert_eq!(
                    s.st_nlink, *names as u64,
                    "round {round}: ino {ino}'s link count"
                );
            }
            // Directory link counts: 2 + subdirectories, checked through the listing.
            let root = st.root_dir().unwrap();
            for w in root.walk_dir(".") {
                let w = w.unwrap();
                if !w.file_type().is_dir() {
                    continue;
                }
                let sub = root
                    .read_dir(w.path())
                    .unwrap()
                    .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_dir())
                    .count() as u64;
                let nl = root.symlink_metadata(w.path()).unwrap().nlink();
                assert_eq!(nl, 2 + sub, "round {round}: {}", w.path().display());
            }
            for k in 0..3 {
                let p = format!("/new{k}");
                let fd = st
                    .openat(CWD, p.as_str(), OpenFlags::CREAT | OpenFlags::WRONLY, 0o600)
                    .unwrap();
                let ino = st.fstat(fd).unwrap().st_ino;
                assert!(
                    !all.contains_key(&ino),
                    "round {round}: new file reuses {ino}"
                );
            }
        }
    });
}
