//! Regression tests for the bugs a code review found (each opens with bug, cause, fix).
//! uvfs-only: each asserts the result Linux 6.18 gives, as measured on the host by the
//! review.

use std::sync::Arc;
use uvfs::types::{SEEK_CUR, S_IFREG};
use uvfs::{tmpfs, AtFlags, Cred, Errno, Fd, OpenFlags, Task, Timespec};

const RW_CREAT: OpenFlags = OpenFlags::RDWR.union(OpenFlags::CREAT);

fn setup() -> (Arc<uvfs::Mount>, Task) {
    let mnt = tmpfs::mount(Default::default());
    let t = Task::init(&mnt);
    (mnt, t)
}

/// Bug: a thread holding `task.files()` could close a descriptor while the task read it:
/// use-after-free (a segfault in the review's proof of concept).
/// Cause: `fdget` lent the `File` without a reference whenever the table's `Arc` count was
/// 1, but `Task::files()` handed the table itself out.
/// Fix: `files()` marks the table exposed; an exposed table always takes references.
#[test]
fn close_through_files_during_read() {
    let (_mnt, t) = setup();
    let data = vec![7u8; 4 << 20];
    let mut bad = 0;
    for _ in 0..20 {
        // A File whose only reference is this descriptor's, on an unlinked file: closing
        // it frees the data at once.
        let fd = t.open("/big", RW_CREAT, 0o644).unwrap();
        assert_eq!(t.write(fd, &data), Ok(data.len()));
        t.unlinkat(Fd::AT_FDCWD, "/big", AtFlags::empty()).unwrap();
        let files = t.files();
        std::thread::scope(|s| {
            let closer = s.spawn(move || {
                let r = files.close_fd(fd.0);
                // Advance the epoch so that everything the close retired is freed, then
                // reuse the freed memory, so that a read of it shows.
                for _ in 0..512 {
                    crossbeam_epoch::pin().flush();
                }
                let junk: Vec<Box<[u8; 4096]>> =
                    (0..1024).map(|_| Box::new([0xAA; 4096])).collect();
                std::hint::black_box(&junk);
                r
            });
            let mut buf = vec![0u8; 4 << 20];
            match t.pread(fd, &mut buf, 0) {
                Ok(n) => {
                    assert_eq!(n, buf.len());
                    if !buf.iter().all(|&b| b == 7) {
                        bad += 1;
                    }
                }
                Err(e) => assert_eq!(e, Errno::EBADF),
            }
            assert_eq!(closer.join().unwrap(), Ok(()));
        });
    }
    assert_eq!(bad, 0, "a read saw freed data");
}

/// Bug: a write refused with `EFBIG` still cleared set-user-ID/set-group-ID and moved ctime.
/// Cause: the privilege kill ran before the size-limit check.
/// Fix: it runs in `write_at` after the checks, under the data lock (Linux:
/// `file_remove_privs` after `generic_write_checks`).
#[test]
fn efbig_write_changes_nothing() {
    let (_mnt, t) = setup();
    t.umask(0);
    let fd = t.open("/f", RW_CREAT, 0o6777).unwrap();
    assert_eq!(t.ftruncate(fd, i64::MAX), Ok(()));
    let st0 = t.fstat(fd).unwrap();
    assert_eq!(st0.st_mode, S_IFREG | 0o6777);
    let mut u = t.fork();
    u.set_cred(Cred::new(1000, 1000, &[]));
    let ufd = u
        .open("/f", OpenFlags::WRONLY | OpenFlags::APPEND, 0)
        .unwrap();
    assert_eq!(u.write(ufd, b"x"), Err(Errno::EFBIG));
    let st1 = t.fstat(fd).unwrap();
    assert_eq!(st1.st_mode, st0.st_mode);
    assert_eq!(st1.st_ctime, st0.st_ctime);
    assert_eq!(st1.st_mode & 0o170000, S_IFREG);
}

/// Bug: a zero-length write on an `O_APPEND` descriptor moved its position to end of file.
/// Cause: `write_at` applied the append reposition before returning for an empty buffer.
/// Fix: an empty write returns first (`generic_write_checks_count`).
#[test]
fn empty_append_write_keeps_position() {
    let (_mnt, t) = setup();
    let fd = t.open("/f", RW_CREAT | OpenFlags::APPEND, 0o644).unwrap();
    assert_eq!(t.write(fd, b"hello"), Ok(5));
    assert_eq!(t.lseek(fd, 0, uvfs::types::SEEK_SET), Ok(0));
    assert_eq!(t.write(fd, b""), Ok(0));
    assert_eq!(t.lseek(fd, 0, SEEK_CUR), Ok(0));
}

/// Bug: `open(".", O_CREAT|O_EXCL)` (also `..`, `/`) returned `EISDIR`; Linux `EEXIST`.
/// Cause: the dot entries and a trailing slash shared one `EISDIR` branch.
/// Fix: for `.`/`..`/`/`, `O_EXCL` gives `EEXIST` first (`do_open`); a trailing slash stays
/// `EISDIR` (`open_last_lookups`).
#[test]
fn creat_excl_on_dots() {
    let (_mnt, t) = setup();
    t.mkdirat(Fd::AT_FDCWD, "/d", 0o755).unwrap();
    let ce = OpenFlags::CREAT | OpenFlags::EXCL;
    for p in [".", "..", "/", "/d/.", "/d/.."] {
        assert_eq!(t.open(p, ce, 0o644), Err(Errno::EEXIST), "{p}");
        assert_eq!(
            t.open(p, OpenFlags::CREAT, 0o644),
            Err(Errno::EISDIR),
            "{p}"
        );
    }
    assert_eq!(t.open("/d/", ce, 0o644), Err(Errno::EISDIR));
    assert_eq!(t.open("/new/", ce, 0o644), Err(Errno::EISDIR));
}

/// Bug: `O_NOATIME` was permission-checked but reads still stamped atime.
/// Cause: `read`/`pread`/`getdents64` called `touch_atime` unconditionally.
/// Fix: `File::file_accessed` skips it for `O_NOATIME` files (Linux `file_accessed`).
#[test]
fn noatime_reads_leave_atime() {
    let (_mnt, t) = setup();
    let fd = t.open("/f", RW_CREAT, 0o644).unwrap();
    t.write(fd, b"abc").unwrap();
    let old = Timespec::new(1, 0);
    t.futimens(fd, Some(&[old, Timespec::UTIME_OMIT])).unwrap();
    let nf = t
        .open("/f", OpenFlags::RDONLY | OpenFlags::NOATIME, 0)
        .unwrap();
    let mut b = [0u8; 3];
    assert_eq!(t.read(nf, &mut b), Ok(3));
    assert_eq!(t.pread(nf, &mut b, 0), Ok(3));
    assert_eq!(t.fstat(fd).unwrap().st_atime, old);
    assert_eq!(t.pread(fd, &mut b, 0), Ok(3));
    assert!(
        t.fstat(fd).unwrap().st_atime > old,
        "a plain read stamps atime"
    );
}

/// Bug (review L1): dropping the last `Arc<Mount>` emptied directories that still had open
/// descriptors, leaving them listing nothing while not marked removed.
/// Cause: teardown assumed open files pinned the mount, which they did not.
/// Fix (mount tree): open files hold their mount, as on Linux, so when the namespace goes
/// (its last task and the embedder's handle dropped) the mount is detached like a lazy
/// unmount: files and directories still open keep working, and the tree goes with the last
/// of them.
#[test]
fn namespace_teardown_with_open_files() {
    let mnt = tmpfs::mount(Default::default());
    let t = Task::init(&mnt);
    t.mkdirat(Fd::AT_FDCWD, "/d", 0o755).unwrap();
    let f = t.filp_open(Fd::AT_FDCWD, "/d/f", RW_CREAT, 0o644).unwrap();
    let d = t
        .filp_open(Fd::AT_FDCWD, "/d", OpenFlags::DIRECTORY, 0)
        .unwrap();
    drop(t);
    drop(mnt);
    // Adopt the handles into a task of another namespace.
    let other = tmpfs::mount(Default::default());
    let o = Task::init(&other);
    let ffd = o.install_file(f, false).unwrap();
    let dfd = o.install_file(d, false).unwrap();
    assert_eq!(o.write(ffd, b"still here"), Ok(10));
    let mut b = [0u8; 10];
    assert_eq!(o.pread(ffd, &mut b, 0), Ok(10));
    assert_eq!(&b, b"still here");
    let mut buf = [0u8; 256];
    let n = o.getdents64(dfd, &mut buf).unwrap();
    let mut names: Vec<Vec<u8>> = uvfs::parse_dirents(&buf[..n])
        .into_iter()
        .map(|e| e.name)
        .collect();
    names.sort();
    assert_eq!(names, [b".".to_vec(), b"..".to_vec(), b"f".to_vec()]);
    // A descriptor of another namespace is no dirfd here.
    assert_eq!(o.fstatat(dfd, "f", AtFlags::empty()), Err(Errno::EXDEV));
}
