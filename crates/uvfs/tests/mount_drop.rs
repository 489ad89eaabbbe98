//! Dropping a `Mount` frees its tree: embedders that make one mount per test or per sandbox
//! must not grow.
//!
//! Bug (issue 15 item 2): 1000 cycles of (`tmpfs::mount`, write a 1 MiB file, drop the task
//! and the mount) reached 1.04 GB RSS; the root dentry and the file stayed alive forever.
//! Cause: `Mount::drop` empties every directory with `SkipList::clear`, which only marks the
//! nodes of its last batch removed and leaves them linked; each node holds its child
//! `Arc<Dentry>`, whose link holds the parent, so root dentry -> root inode -> skip list ->
//! node -> child dentry -> root dentry was a cycle that nothing searched again to break.
//! Fix: `DirLocked::clear` searches the list once more after `clear`, which unlinks every
//! marked node and hands its last reference to the epoch.
//!
//! Frees go through crossbeam-epoch, so each check first flushes this thread's deferred
//! frees (`epoch::pin().flush()`, repeated until the epoch has moved on) instead of hoping
//! the collector ran: the tests assert on what the tree still holds (weak references to the
//! root dentry, the root inode and the file's inode), which is deterministic, and bound the
//! RSS as a second witness.

use std::sync::{Arc, Weak};
use uvfs::{tmpfs, Dentry, Inode, OpenFlags, Task, TmpfsOptions};

/// Resident set size in bytes (`/proc/self/statm`, second field, in pages).
fn rss() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("statm resident field");
    pages * 4096
}

/// Flushes deferred frees until `gone` holds, for up to 10 s
/// (`uvfs::sync::flush_deferred_until`, which says why not a fixed count).
fn flush_until(gone: impl Fn() -> bool) -> bool {
    uvfs::sync::flush_deferred_until(gone, std::time::Duration::from_secs(10))
}

/// What the last cycle's tree held: the root dentry, the root inode, the file's inode.
struct Witness {
    root: Weak<Dentry>,
    root_inode: Weak<Inode>,
    file: Weak<Inode>,
}

impl Witness {
    fn gone(&self) -> bool {
        self.root.strong_count() == 0
            && self.root_inode.strong_count() == 0
            && self.file.strong_count() == 0
    }
}

/// One cycle: mount, write `data` to `/f` (closed, or left open until the task goes when
/// `keep_open`), drop everything.
fn cycle(opts: TmpfsOptions, data: &[u8], keep_open: bool) -> Witness {
    let m = tmpfs::mount(opts);
    let t = Task::init(&m);
    let fd = t
        .open(b"/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644)
        .expect("create /f");
    assert_eq!(t.write(fd, data), Ok(data.len()));
    let file = Arc::downgrade(t.files().fget(fd.0).expect("fget").inode());
    if !keep_open {
        t.close(fd).expect("close");
    }
    let w = Witness {
        root: Arc::downgrade(m.root()),
        root_inode: Arc::downgrade(m.root().inode()),
        file,
    };
    drop(t);
    drop(m);
    w
}

#[test]
fn mount_drop_frees_the_tree_10000_cycles() {
    const CYCLES: usize = 10_000;
    const MIB: usize = 1 << 20;
    let data = vec![0x5a; MIB];
    // Unlimited and with limits (the accounting holds an `Arc` of its own in each inode).
    let opts = |i: usize| TmpfsOptions {
        size: Some(if i.is_multiple_of(2) {
            0
        } else {
            64 * MIB as u64
        }),
        ..TmpfsOptions::default()
    };
    // Warm up the allocator and the epoch's bags before taking the baseline.
    for i in 0..100 {
        let w = cycle(opts(i), &data, i.is_multiple_of(3));
        assert!(
            flush_until(|| w.gone()),
            "warm-up cycle {i}: tree still alive"
        );
    }
    let base = rss();
    for i in 0..CYCLES {
        let w = cycle(opts(i), &data, i.is_multiple_of(3));
        assert!(
            flush_until(|| w.gone()),
            "cycle {i}: the dropped mount's tree is still alive"
        );
        if (i + 1).is_multiple_of(1000) {
            // Before the fix: +1 MiB per cycle (1 GB at cycle 1000). After: flat; the
            // bound leaves room for allocator noise and the epoch's bags.
            let grown = rss().saturating_sub(base);
            assert!(
                grown < 64 * MIB as u64,
                "cycle {i}: RSS grew by {} MiB since cycle 0",
                grown >> 20
            );
        }
    }
}

/// A tree larger than one of `SkipList::clear`'s batches (100 entries), nested, with
/// subdirectories and a hard link: every level goes.
#[test]
fn mount_drop_frees_a_large_nested_tree() {
    let m = tmpfs::mount(TmpfsOptions {
        size: Some(0),
        ..TmpfsOptions::default()
    });
    let t = Task::init(&m);
    let mut inodes = Vec::new();
    for d in 0..3 {
        let dir = format!("/d{d}");
        t.mkdirat(uvfs::Fd::AT_FDCWD, dir.as_bytes(), 0o755)
            .expect("mkdir");
        for f in 0..250 {
            let p = format!("{dir}/f{f}");
            let fd = t
                .open(p.as_bytes(), OpenFlags::CREAT | OpenFlags::WRONLY, 0o644)
                .expect("create");
            assert_eq!(t.write(fd, b"x"), Ok(1));
            inodes.push(Arc::downgrade(t.files().fget(fd.0).expect("fget").inode()));
            t.close(fd).expect("close");
        }
    }
    t.linkat(
        uvfs::Fd::AT_FDCWD,
        b"/d0/f0",
        uvfs::Fd::AT_FDCWD,
        b"/d2/link",
        uvfs::AtFlags::empty(),
    )
    .expect("link");
    let root = Arc::downgrade(m.root());
    drop(t);
    drop(m);
    assert!(
        flush_until(|| root.strong_count() == 0 && inodes.iter().all(|i| i.strong_count() == 0)),
        "the dropped mount's tree is still alive: root {}, files {}",
        root.strong_count(),
        inodes.iter().filter(|i| i.strong_count() > 0).count()
    );
}

/// The weak reference of the dentry `path` names (opened as a directory and closed).
fn dir_dentry(t: &Task, path: &[u8]) -> Weak<Dentry> {
    let fd = t
        .open(path, OpenFlags::RDONLY | OpenFlags::DIRECTORY, 0)
        .expect("open dir");
    let w = Arc::downgrade(t.files().fget(fd.0).expect("fget").dentry());
    t.close(fd).expect("close");
    w
}

/// Directories removed while the mount lives are freed, and a removed directory stays
/// alive exactly while something below it does: a child's link holds its parent through
/// the parent's sharded child count (dentry.rs `ParentLink`), which is detached when the
/// directory is removed and gives the directory's hold on itself back when its last
/// child's link goes. rmdir of an empty directory (and of its parent after it); rename
/// over an empty directory; a directory whose unlinked file is still open, freed only
/// after the close; and 1000 mkdir/rmdir rounds leave no directory behind.
#[test]
fn removed_directories_are_freed_when_nothing_below_them_lives() {
    let m = tmpfs::mount(TmpfsOptions::default());
    let t = Task::init(&m);
    let at = uvfs::Fd::AT_FDCWD;
    let rmdir = uvfs::AtFlags::REMOVEDIR;
    // rmdir, innermost first.
    t.mkdirat(at, b"/a", 0o755).expect("mkdir");
    t.mkdirat(at, b"/a/b", 0o755).expect("mkdir");
    let (a, b) = (dir_dentry(&t, b"/a"), dir_dentry(&t, b"/a/b"));
    t.unlinkat(at, b"/a/b", rmdir).expect("rmdir b");
    t.unlinkat(at, b"/a", rmdir).expect("rmdir a");
    assert!(
        flush_until(|| a.strong_count() == 0 && b.strong_count() == 0),
        "removed directories alive: a {}, b {}",
        a.strong_count(),
        b.strong_count()
    );
    // rename over an empty directory: the replaced one goes.
    t.mkdirat(at, b"/x", 0o755).expect("mkdir");
    t.mkdirat(at, b"/y", 0o755).expect("mkdir");
    let y = dir_dentry(&t, b"/y");
    t.renameat(at, b"/x", at, b"/y").expect("rename");
    assert!(
        flush_until(|| y.strong_count() == 0),
        "replaced directory alive"
    );
    // A removed directory with an open, unlinked file: alive until the close.
    t.mkdirat(at, b"/c", 0o755).expect("mkdir");
    let fd = t
        .open(b"/c/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644)
        .expect("create");
    let c = dir_dentry(&t, b"/c");
    t.unlinkat(at, b"/c/f", uvfs::AtFlags::empty())
        .expect("unlink");
    t.unlinkat(at, b"/c", rmdir).expect("rmdir c");
    // A witness removed after it: once it is freed, `c`'s settle has run too (queued
    // before the witness's, on this thread). The open file's link still holds `c`.
    t.mkdirat(at, b"/w", 0o755).expect("mkdir");
    let w = dir_dentry(&t, b"/w");
    t.unlinkat(at, b"/w", rmdir).expect("rmdir w");
    assert!(flush_until(|| w.strong_count() == 0), "witness alive");
    assert!(c.strong_count() > 0, "freed while its file is open");
    assert_eq!(t.write(fd, b"data"), Ok(4));
    t.close(fd).expect("close");
    assert!(
        flush_until(|| c.strong_count() == 0),
        "alive after the close"
    );
    // mkdir/rmdir rounds.
    let mut gone = Vec::new();
    for _ in 0..1000 {
        t.mkdirat(at, b"/r", 0o755).expect("mkdir");
        gone.push(dir_dentry(&t, b"/r"));
        t.unlinkat(at, b"/r", rmdir).expect("rmdir");
    }
    assert!(
        flush_until(|| gone.iter().all(|d| d.strong_count() == 0)),
        "{} of 1000 removed directories alive",
        gone.iter().filter(|d| d.strong_count() > 0).count()
    );
}
