//! Loom models of `FdTable` (fdtable.rs): `fget` against `close` against `dup2` on one
//! descriptor, against a descriptor's reuse, and against table growth.
//!
//! What loom sees: under `--cfg uvfs_loom` the slot atomics, the published array pointer
//! (`FdTable::fdt`), the `FileRef` counts and `file_lock` are loom's, so every interleaving of
//! their operations (up to `LOOM_MAX_PREEMPTIONS`) and every value a load may read under the
//! C++ memory model is explored, and loom checks that each atomic (a new array's slots, a new
//! `File`'s count) is created before another thread loads it. The epoch itself is
//! crossbeam-epoch's real one: loom runs all model threads as coroutines on one OS thread, so
//! they share one epoch participant, and a pin in any model thread keeps it pinned. That only
//! delays frees (garbage retired while it is pinned is not collected before the last guard
//! goes), so memory stays valid at least as long as with real threads. The array pointer was
//! a crossbeam `Atomic` at first; loom could not see its Release/Acquire pair and reported the
//! new array's slots as loaded before they were created, hence `sync::AtomicPtr` there.
//!
//! What the models cannot see: the `Inode`/`Dentry`/directory locks and atomics are `std`'s
//! and `parking_lot`'s, unseen by loom; at most one model thread at a time does tmpfs work
//! (open, create), because a model thread blocked on a real lock held by a preempted
//! coroutine would hang the model.
//!
//! How "released" is observed, with no test hook: every model pins the epoch for its whole
//! run, so a released `File`'s memory stays allocated and its `f_ref` can be read (0 once
//! released: the dead zone is never left); and each live `File` holds one `Arc<Dentry>` (its
//! `f_dentry`), dropped at release, so the dentries' strong counts count releases exactly (a
//! double release shows as a deficit, a leak as a surplus).

use crate::dentry::Dentry;
use crate::file::File;
use crate::mount::Mount;
use crate::sync::epoch;
use crate::sync::rcu::{RcuRef, RcuRefcounted};
use crate::sync::refcount::RefCount as _;
use crate::variant::{CasRefVariant, Uvfs, Variant};
use crate::{tmpfs, Errno, Fd, FileHandle, OpenFlags, Task};
use loom::thread;
use std::cell::RefCell;
use std::sync::Arc;

/// A tmpfs, a task on it, and the dentries of the files opened, each with its reference
/// count when no `File` is open on it (each unreleased `File` holds one dentry reference).
struct Setup<V: Variant = Uvfs> {
    _mnt: Arc<Mount>,
    task: Task<V>,
    dentries: RefCell<Vec<(Arc<Dentry>, usize)>>,
}

impl<V: Variant> Setup<V> {
    /// Must run inside `loom::model`: the fd table's atomics and lock are loom objects.
    fn new() -> Setup<V> {
        // Unlimited: a mount with limits (the default) charges its inodes to counters that
        // are loom atomics, and an inode the epoch frees after this execution would touch
        // them from the next one (loom: "index out of bounds" in its object store).
        let mnt = tmpfs::mount(tmpfs::TmpfsOptions::unlimited());
        let task = Task::init_variant(&mnt);
        Setup {
            _mnt: mnt,
            task,
            dentries: RefCell::new(Vec::new()),
        }
    }

    /// Unreleased `File`s among those opened by `filp`: each holds one reference on the
    /// dentry it was opened at, dropped exactly once at release (a double release shows as
    /// a deficit, a leak as a surplus).
    fn live(&self) -> usize {
        self.dentries
            .borrow()
            .iter()
            .map(|(d, base)| Arc::strong_count(d) - base)
            .sum()
    }

    /// Creates `/name` and opens it, returning a handle (not installed).
    fn filp(&self, name: &str) -> FileHandle<V> {
        let h = self
            .task
            .filp_open(
                Fd::AT_FDCWD,
                format!("/{name}"),
                OpenFlags::CREAT | OpenFlags::RDWR,
                0o644,
            )
            .unwrap();
        self.track(&h);
        h
    }

    /// Records the dentry of `h`'s file, which has exactly one `File` open on it now.
    fn track(&self, h: &FileHandle<V>) {
        let d = h.dentry().clone();
        // Now held by the tree, by `h`'s File and by `d`: the base excludes the File's.
        let base = Arc::strong_count(&d) - 1;
        self.dentries.borrow_mut().push((d, base));
    }

    /// Creates and opens `/name` at the lowest free descriptor; returns the descriptor and
    /// the file's address (as `usize`, to move into model threads).
    fn open(&self, name: &str) -> (i32, usize) {
        let h = self.filp(name);
        let p = RcuRef::as_ptr(&h) as usize;
        let fd = self.task.install_file(h, false).unwrap();
        (fd.0, p)
    }

    /// Asserts that each of `files` has exactly one reference if a descriptor among `fds`
    /// refers to it (the table's: references are per table, not per slot) and none otherwise
    /// (the models hold no other handle by then), that a file with none was
    /// released, and that each was released at most once and none leaked (the mount count).
    fn assert_counts(&self, fds: &[i32], files: &[usize]) {
        let table = self.task.files();
        let mut live = 0;
        for &f in files {
            let held = fds
                .iter()
                .filter(|&&fd| {
                    table
                        .fget(fd)
                        .is_ok_and(|h| RcuRef::as_ptr(&h) as usize == f)
                })
                .count() as u64;
            let held = held.min(1);
            let f = f as *const File<V>;
            // SAFETY: every model pins the epoch for its whole run, so the memory of a file
            // opened in it is not freed yet even if the file was released; reading its count
            // is what `fget` does to a released file (`RcuRef::try_get_raw`).
            let count = unsafe { (*<File<V> as RcuRefcounted>::file_ref_raw(f)).read() };
            assert_eq!(
                count, held,
                "references != table holds it (leak or double put)"
            );
            if count > 0 {
                live += 1;
            }
        }
        assert_eq!(
            self.live(),
            live,
            "each released file dropped its fields exactly once"
        );
    }

    /// Closes every descriptor and checks that all of `files` were released exactly once.
    fn close_all(&self, fds: &[i32], files: &[usize]) {
        self.task.files().close_range(0, u32::MAX);
        self.assert_counts(fds, files);
        assert_eq!(self.live(), 0, "a file leaked");
    }
}

/// Asserts that `r`, an `fget` result, is `EBADF` or a live file among `allowed`.
fn check_fget<V: Variant>(r: crate::Result<FileHandle<V>>, allowed: &[usize]) {
    match r {
        Ok(h) => {
            // A released count reads 0 forever: a get that "succeeded" on it would show here.
            assert!(h.count() >= 1, "fget returned a released file");
            assert!(
                allowed.contains(&(RcuRef::as_ptr(&h) as usize)),
                "fget returned a file never installed at that descriptor"
            );
            // `h` is dropped here; if the descriptor was closed meanwhile this put releases.
        }
        Err(e) => assert_eq!(e, Errno::EBADF),
    }
}

/// `fget(0)` against `close(0)` against `dup2(1, 0)`: fget sees A, B or EBADF, never a
/// released file; afterwards A (held only by fd 0) is released exactly once and B's count is
/// the number of descriptors naming it, whichever of close and dup2 ran first.
#[test]
fn fget_close_dup2_same_fd() {
    fget_close_dup2_same_fd_with::<Uvfs>();
}

/// The same race with the lesson-2 baseline (`CasRef`, an inc-not-zero loop) in the fd
/// table, as `uvfs bench --ablation` runs it: the fget protocol must hold for it too.
#[test]
fn cas_ref_fget_close_dup2_same_fd() {
    fget_close_dup2_same_fd_with::<CasRefVariant>();
}

fn fget_close_dup2_same_fd_with<V: Variant>() {
    loom::model(|| {
        let _pin = epoch::pin();
        let s = Setup::<V>::new();
        let (fa, a) = s.open("a");
        let (fb, b) = s.open("b");
        assert_eq!((fa, fb), (0, 1));

        let t = s.task.clone_thread();
        let getter = thread::spawn(move || check_fget(t.files().fget(0), &[a, b]));
        let t = s.task.clone_thread();
        let closer = thread::spawn(move || t.close(Fd(0)).unwrap());
        let t = s.task.clone_thread();
        let duper = thread::spawn(move || assert_eq!(t.dup2(Fd(1), Fd(0)), Ok(Fd(0))));
        getter.join().unwrap();
        closer.join().unwrap();
        duper.join().unwrap();

        s.assert_counts(&[0, 1], &[a, b]);
        s.close_all(&[0, 1], &[a, b]);
    });
}

/// `fget(0)` (twice) against `close(0)` then `open` reusing fd 0 for a new file C (race 2 of
/// fdtable.rs: the descriptor is reused while fget holds the old pointer). C is created in
/// the reusing thread, so loom checks that `fd_install`'s Release store and `fget`'s Acquire
/// slot load publish C's fields (its `f_ref`) before `fget` touches them. Each fget sees A,
/// EBADF or C, never a released file, and never goes back to A once it has seen the close.
#[test]
fn fget_close_reuse() {
    loom::model(|| {
        let _pin = epoch::pin();
        let s = Setup::<Uvfs>::new();
        let (_, a) = s.open("a");

        let t = s.task.clone_thread();
        let getter = thread::spawn(move || {
            let ptr = |r: crate::Result<FileHandle>| {
                r.map(|h| {
                    assert!(h.count() >= 1, "fget returned a released file");
                    RcuRef::as_ptr(&h) as usize
                })
            };
            let first = ptr(t.files().fget(0));
            let second = ptr(t.files().fget(0));
            (first, second)
        });
        let t = s.task.clone_thread();
        let reuser = thread::spawn(move || {
            t.close(Fd(0)).unwrap();
            let fd = t.open("/c", OpenFlags::CREAT | OpenFlags::RDWR, 0o644);
            assert_eq!(fd, Ok(Fd(0)));
        });
        let (first, second) = getter.join().unwrap();
        reuser.join().unwrap();

        let hc = s.task.files().fget(0).unwrap();
        s.track(&hc);
        let c = RcuRef::as_ptr(&hc) as usize;
        drop(hc);
        for r in [first, second] {
            assert!(r == Ok(a) || r == Ok(c) || r == Err(Errno::EBADF), "{r:?}");
        }
        // Coherence of the slot: A, then NULL, then C; a later fget never reads back.
        if first != Ok(a) {
            assert_ne!(
                second,
                Ok(a),
                "fget went back to a closed descriptor's file"
            );
        }
        if first == Ok(c) {
            assert_eq!(second, Ok(c));
        }
        s.assert_counts(&[0], &[a, c]);
        s.close_all(&[0], &[a, c]);
    });
}

/// `fget` against growth: `dup2(1, 100)` copies the 64 slots into a 128-slot array and
/// publishes it, then `close(0)` clears fd 0 in the new array only (race 3 of fdtable.rs:
/// the old array still holds A), while a third thread closes fd 1, the source of the dup2.
/// fget(0) sees A or EBADF, fget(1) and fget(100) B or EBADF; the dup2 either copies B (one
/// more reference) or fails with EBADF; afterwards the counts match the table.
#[test]
fn fget_races_growth() {
    loom::model(|| {
        let _pin = epoch::pin();
        let s = Setup::<Uvfs>::new();
        let (_, a) = s.open("a");
        let (_, b) = s.open("b");

        let t = s.task.clone_thread();
        let getter = thread::spawn(move || {
            check_fget(t.files().fget(0), &[a]);
            check_fget(t.files().fget(1), &[b]);
            check_fget(t.files().fget(100), &[b]);
        });
        let t = s.task.clone_thread();
        let grower = thread::spawn(move || {
            let r = t.dup2(Fd(1), Fd(100));
            assert!(r == Ok(Fd(100)) || r == Err(Errno::EBADF), "{r:?}");
            t.close(Fd(0)).unwrap();
        });
        let t = s.task.clone_thread();
        let closer = thread::spawn(move || t.close(Fd(1)).unwrap());
        getter.join().unwrap();
        grower.join().unwrap();
        closer.join().unwrap();

        s.assert_counts(&[0, 1, 100], &[a, b]);
        s.close_all(&[0, 1, 100], &[a, b]);
    });
}

/// Per-table references (fdtable.rs): a parent and its fork each hold one reference on the
/// shared file A, whatever their slot counts. The child runs `close(dup(0))` then `close(0)`
/// (its slot count goes 1 -> 2 -> 1 -> 0, and only the last close drops its reference) while
/// the parent runs `fget(0)` then `close(0)`. A is released exactly once, after both tables
/// and the handle let go, and `fget` never sees it released.
#[test]
fn fork_dup_close_shared_file() {
    loom::model(|| {
        let _pin = epoch::pin();
        let s = Setup::<Uvfs>::new();
        let (fa, a) = s.open("a");
        assert_eq!(fa, 0);
        let child = s.task.fork();
        // One reference per table, not per descriptor.
        let count = |p: usize| {
            // SAFETY: pinned for the whole model: A's memory stays allocated (see
            // `assert_counts`).
            unsafe { (*<File as RcuRefcounted>::file_ref_raw(p as *const File)).read() }
        };
        assert_eq!(count(a), 2);

        let c = thread::spawn(move || {
            let d = child.dup(Fd(0)).unwrap();
            assert_eq!(d, Fd(1));
            child.close(d).unwrap();
            child.close(Fd(0)).unwrap();
        });
        let t = s.task.clone_thread();
        let p = thread::spawn(move || {
            check_fget(t.files().fget(0), &[a]);
            t.close(Fd(0)).unwrap();
        });
        c.join().unwrap();
        p.join().unwrap();

        assert_eq!(count(a), 0, "A released once both tables closed it");
        assert_eq!(s.live(), 0, "A leaked or released twice");
    });
}

/// The private-table protocol (`Task::fd_table`, `FdTable::private`): a table is shared by a
/// second task (`clone_thread`) that writes it under `file_lock` and then goes; the owner
/// writes it without the lock once it reads the task count 1. The count stands in for the
/// `Arc`'s strong count (std's `Arc` is invisible to loom), with the same orderings: the
/// going task's decrement is Release (`Arc::drop`), the owner's read is Relaxed
/// (`Arc::strong_count`) followed by the Acquire fence of `Task::fd_table`. The allocation
/// state is a loom `UnsafeCell` (`FileLock::alloc`), so loom reports any two accesses to it
/// that the protocol leaves unordered as a data race. No files: descriptor reservations
/// alone write the state, and nothing else the model holds needs dropping if loom stops it.
fn private_after_shared(fence_after_count: bool) {
    use crate::fdtable::FdTable;
    use loom::sync::atomic::{fence, AtomicUsize, Ordering};
    loom::model(move || {
        // Not dropped when the model is expected to fail: loom's report must not be
        // followed by a second panic from a drop during unwinding.
        let table = std::mem::ManuallyDrop::new(Arc::new(FdTable::<Uvfs>::new_variant()));
        let users = Arc::new(AtomicUsize::new(2));
        let (t2, u2) = (Arc::clone(&table), users.clone());
        let h = thread::spawn(move || {
            let r = t2.shared();
            let fd = r.alloc_fd(0, false).unwrap();
            r.put_unused_fd(fd);
            // Release: `Arc::drop`'s decrement.
            u2.fetch_sub(1, Ordering::Release);
            drop(t2);
        });
        // Relaxed: `Arc::strong_count`.
        let r = if users.load(Ordering::Relaxed) > 1 {
            table.shared()
        } else {
            if fence_after_count {
                // Acquire: `Task::fd_table`'s fence, pairing with the Release above.
                fence(Ordering::Acquire);
            }
            // SAFETY: the other task has gone (count 1) and published its writes by its
            // Release decrement, paired with the fence above (the variant without it is the
            // bug the model must catch).
            unsafe { table.private() }
        };
        let fd = r.alloc_fd(0, false).unwrap();
        r.put_unused_fd(fd);
        h.join().unwrap();
        if fence_after_count {
            drop(std::mem::ManuallyDrop::into_inner(table));
        }
    });
}

/// The owner goes lockless only after the other task's writes under the lock are visible.
#[test]
fn private_table_after_shared() {
    private_after_shared(true);
}

/// Without `Task::fd_table`'s Acquire fence, the owner's lockless writes race with the
/// other task's last ones under the lock: loom must report it.
#[test]
#[should_panic(expected = "Causality violation")]
fn private_table_without_fence_races() {
    private_after_shared(false);
}

/// A borrowing `fdget` (`FdTable::fdget_borrow`, the table being shared) of `fd`, held while
/// checked: it is `EBADF` or names one of `allowed`, alive for as long as it is held (a
/// close meanwhile pays the borrow instead of releasing the file under it). Returns the
/// file's address, if any.
fn check_borrow(t: &Task, fd: i32, allowed: &[usize]) -> Option<usize> {
    match t.fdget_raw(Fd(fd)) {
        Ok(f) => {
            assert!(
                matches!(f, crate::fdtable::FdRef::Lent(_)),
                "a shared table lends"
            );
            let p = &*f as *const File as usize;
            assert!(
                allowed.contains(&p),
                "borrowed a file never at that descriptor"
            );
            // A released count reads 0 forever (the model pins the epoch).
            assert!(
                f.count() >= 1,
                "the borrowed file was released under the borrow"
            );
            thread::yield_now();
            assert!(
                f.count() >= 1,
                "the borrowed file was released under the borrow"
            );
            // Dropped here: a paid borrow puts its reference, maybe the file's last.
            Some(p)
        }
        Err(e) => {
            assert_eq!(e, Errno::EBADF);
            None
        }
    }
}

/// A borrow of fd 0 against `close(0)`: the borrow sees A or EBADF; A stays alive while
/// borrowed and is released exactly once, by the closer or by the borrower's paid
/// reference, whichever comes last.
#[test]
fn borrow_close_same_fd() {
    loom::model(|| {
        let _pin = epoch::pin();
        let s = Setup::<Uvfs>::new();
        let (fa, a) = s.open("a");
        assert_eq!(fa, 0);
        let t = s.task.clone_thread();
        let borrower = thread::spawn(move || {
            check_borrow(&t, 0, &[a]);
        });
        let t = s.task.clone_thread();
        let closer = thread::spawn(move || t.close(Fd(0)).unwrap());
        borrower.join().unwrap();
        closer.join().unwrap();
        s.assert_counts(&[0], &[a]);
        assert_eq!(s.live(), 0, "A leaked or was released twice");
    });
}

/// A borrow of fd 0 against two writers of it: `close(0)` and `dup2(1, 0)` (one of them
/// drops the table's last slot of A and pays). The borrow sees A, B or EBADF, alive while
/// held; A is released exactly once; B keeps the table's one reference.
#[test]
fn borrow_close_dup2_same_fd() {
    loom::model(|| {
        let _pin = epoch::pin();
        let s = Setup::<Uvfs>::new();
        let (fa, a) = s.open("a");
        let (fb, b) = s.open("b");
        assert_eq!((fa, fb), (0, 1));
        let t = s.task.clone_thread();
        let borrower = thread::spawn(move || {
            check_borrow(&t, 0, &[a, b]);
        });
        let t = s.task.clone_thread();
        let closer = thread::spawn(move || t.close(Fd(0)).unwrap());
        let t = s.task.clone_thread();
        let duper = thread::spawn(move || assert_eq!(t.dup2(Fd(1), Fd(0)), Ok(Fd(0))));
        borrower.join().unwrap();
        closer.join().unwrap();
        duper.join().unwrap();
        s.assert_counts(&[0, 1], &[a, b]);
        s.close_all(&[0, 1], &[a, b]);
    });
}

/// Two borrows held at once (fds 0 and 1, two borrow slots) against `close_range(0, ~0)`
/// (`take_range`, which `exec`'s close-on-exec also uses): each borrow sees its file or
/// EBADF, alive while held; both files are released exactly once.
#[test]
fn borrows_close_range() {
    loom::model(|| {
        let _pin = epoch::pin();
        let s = Setup::<Uvfs>::new();
        let (fa, a) = s.open("a");
        let (fb, b) = s.open("b");
        assert_eq!((fa, fb), (0, 1));
        let t = s.task.clone_thread();
        let borrower = thread::spawn(move || {
            let f0 = t.fdget_raw(Fd(0));
            check_borrow(&t, 1, &[b]);
            if let Ok(f0) = &f0 {
                assert_eq!(&**f0 as *const File as usize, a);
                assert!(f0.count() >= 1, "A released under its borrow");
            }
        });
        let mut t = s.task.clone_thread();
        let closer = thread::spawn(move || t.close_range(0, u32::MAX, 0).unwrap());
        borrower.join().unwrap();
        closer.join().unwrap();
        s.assert_counts(&[0, 1], &[a, b]);
        assert_eq!(s.live(), 0, "a file leaked or was released twice");
    });
}

/// Bug (review): `fcntl(fd, F_SETLK)` by one thread against `close(fd)` by another could
/// leave the process a lock on a file after both returned, where Linux never does. Cause:
/// the setter's re-check that `fd` still names the file (`fcntl_setlk`'s "close/fcntl race"
/// check) was a lockless load, and the close's look for the inode's locks (the
/// `flctx().is_none()` fast path under `file_lock` when another descriptor keeps the file
/// open, `holds_any` after it) a plain load after its slot store: store buffering, each side
/// reading the other's old value. Fix: the re-check runs under `file_lock`
/// (`FilesRef::names`, Linux `files_lookup_fd_locked` under `files->file_lock`), so either
/// the close's critical section comes first and the re-check sees the slot cleared (the
/// setter removes its locks, `EBADF`), or the setter's comes first and the close sees the
/// lock context and the lock. Real code throughout: `fcntl_lock` and `close` (the lock
/// context's own mutex and flag are `std`'s, unseen by loom; the table and the context's
/// `OnceBox` are loom's). Limit: this model passes on the lockless re-check too (loom did
/// not produce the bad outcome there: the borrowing `fdget` the old re-check used issues a
/// loom-only SeqCst fence, and the context's flag is unseen), so it guards the protocol's
/// outcome, not the old bug; `setlk_lockless_recheck_misses_close` below shows the old
/// bug, with a loom stand-in for the flag.
#[test]
fn setlk_recheck_vs_close() {
    use crate::locks::{Flock, LockCmd, F_UNLCK, F_WRLCK};
    loom::model(|| {
        let _pin = epoch::pin();
        let s = Setup::<Uvfs>::new();
        let (fd, _) = s.open("a");
        // A second descriptor keeps the file open: the close takes the fast path.
        let keep = s.task.dup(Fd(fd)).unwrap();
        let t = s.task.clone_thread();
        let setter = thread::spawn(move || {
            let mut fl = Flock {
                l_type: F_WRLCK,
                ..Flock::default()
            };
            let r = t.fcntl_lock(Fd(fd), LockCmd::SetLk, &mut fl);
            assert!(matches!(r, Ok(()) | Err(Errno::EBADF)), "{r:?}");
        });
        s.task.close(Fd(fd)).unwrap();
        setter.join().unwrap();
        // Both returned: the close of `fd` removed the process's locks on the file, or the
        // setter saw the close and removed them itself.
        let other = s.task.fork();
        let mut fl = Flock {
            l_type: F_WRLCK,
            ..Flock::default()
        };
        other.fcntl_lock(keep, LockCmd::GetLk, &mut fl).unwrap();
        assert_eq!(fl.l_type, F_UNLCK, "a lock survived the close: {fl}");
        drop(other);
        s.task.close(keep).unwrap();
    });
}

/// The store-buffering pair behind `setlk_recheck_vs_close`, with the lock context's flag
/// (`FileLockContext::any`, a `std` atomic unseen by loom) as a loom stand-in: the setter
/// publishes its lock, then re-checks the descriptor; the closer clears the slot (real
/// `close`), then looks for locks. `locked`: the re-check under `file_lock`
/// (`FilesRef::names`, the fix); else the lockless one it replaced (a counted `fget`).
/// Panics when an execution leaves a lock neither side removes.
fn setlk_flag_vs_close(locked: bool) {
    use loom::sync::atomic::{AtomicBool, Ordering};
    loom::model(move || {
        let _pin = epoch::pin();
        let s = Setup::<Uvfs>::new();
        let (fd, p) = s.open("a");
        // Another descriptor keeps the file open (so the setter's file stays alive).
        let keep = s.task.dup(Fd(fd)).unwrap();
        let any = Arc::new(AtomicBool::new(false));
        let t = s.task.clone_thread();
        let a2 = any.clone();
        let h = thread::spawn(move || {
            // Relaxed: as `FileLockContext::publish` (its lock does not order it against
            // the re-check below).
            a2.store(true, Ordering::Relaxed);
            if locked {
                // SAFETY: `keep` keeps the file open for the whole model.
                t.fd_table().names(fd, unsafe { &*(p as *const File) })
            } else {
                t.files()
                    .fget(fd)
                    .is_ok_and(|f| RcuRef::as_ptr(&f) as usize == p)
            }
        });
        s.task.close(Fd(fd)).unwrap();
        // Relaxed: as `FileLockContext::holds_any`.
        let seen = any.load(Ordering::Relaxed);
        let same = h.join().unwrap();
        if same && !seen {
            // Not dropped: loom's report must not be followed by a panic in a drop.
            std::mem::forget(s);
            panic!("the setter kept its lock and the close did not see it");
        }
        s.task.close(keep).unwrap();
    });
}

/// With the re-check under `file_lock`, one of the two sides always sees the other.
#[test]
fn setlk_locked_recheck_sees_close() {
    setlk_flag_vs_close(true);
}

/// The lockless re-check (before the fix): loom must find the execution where both sides
/// read the old value.
#[test]
#[should_panic(expected = "the setter kept its lock")]
fn setlk_lockless_recheck_misses_close() {
    setlk_flag_vs_close(false);
}
