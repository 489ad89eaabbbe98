//! `Task`: a thread of a process: its fd table, its file-system context (root, cwd, umask),
//! credentials and pid. The syscall-shaped methods live in open.rs, read_write.rs, stat.rs,
//! attr.rs, namei.rs and readdir.rs.
//!
//! Linux analogue: `struct task_struct` (`files`, `fs`, `cred`, `tgid`), `struct fs_struct`
//! (include/linux/fs_struct.h), kernel/fork.c (`copy_files`, `copy_fs`).
//!
//! A `Task` is `Send` but not `Sync`: each OS thread owns one. Threads of one process are
//! `clone_thread()`s sharing the `FdTable` and `FsStruct` (`CLONE_FILES | CLONE_FS`);
//! `fork()` copies both.
//!
//! Lock order: `FsStruct::lock` is a leaf.

use crate::cred::Cred;
use crate::fdtable::{FdRef, FdTable};
use crate::file::FMode;
use crate::mount::{root_path, MntNamespace, Mount, Path};
use crate::sync::borrow::BorrowSlots;
use crate::sync::epoch::Guard;
use crate::sync::plain::{AtomicI32, AtomicU32, AtomicU64, Mutex, Ordering};
use crate::sync::plock;
use crate::sync::rcu::RcuCell;
use crate::types::Fd;
use crate::variant::{Uvfs, Variant};
use crate::Result;
use std::cell::{Cell, OnceCell};
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

/// Process ids handed out by `fork` (pid 1 is `Task::init`).
static NEXT_PID: AtomicI32 = AtomicI32::new(2);

/// Credential identities handed out by `init`, `fork` and `set_cred` (see `Task::cred_id`).
static NEXT_CRED_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh credential identity.
fn new_cred_id() -> u64 {
    // Relaxed: only uniqueness matters, which the RMW gives; not on a hot path.
    NEXT_CRED_ID.fetch_add(1, Ordering::Relaxed)
}

/// A task's file-system context: root, current directory, umask (`struct fs_struct`).
pub struct FsStruct {
    /// Root for absolute paths and the `..` clamp. Replaced under `lock`.
    pub(crate) root: RcuCell<Path>,
    /// Current working directory. Replaced under `lock`.
    pub(crate) cwd: RcuCell<Path>,
    /// File mode creation mask (atomic; written only when it changes).
    umask: AtomicU32,
    /// Serialises writers of `root` and `cwd`.
    lock: Mutex<()>,
    /// The mount namespace (Linux: `nsproxy->mnt_ns`, per task; uvfs keeps it here, shared
    /// by `CLONE_FS` threads and by `fork`).
    pub(crate) ns: Arc<MntNamespace>,
}

impl fmt::Debug for FsStruct {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Relaxed: diagnostic snapshot.
        let umask = self.umask.load(Ordering::Relaxed);
        f.debug_struct("FsStruct")
            .field("umask", &format_args!("{umask:o}"))
            .finish()
    }
}

impl FsStruct {
    fn copy(&self, guard: &Guard) -> FsStruct {
        FsStruct {
            root: RcuCell::new(self.root.load(guard).clone()),
            cwd: RcuCell::new(self.cwd.load(guard).clone()),
            // Relaxed: a snapshot for the child; no ordering with other data.
            umask: AtomicU32::new(self.umask.load(Ordering::Relaxed)),
            lock: Mutex::new(()),
            ns: self.ns.clone(),
        }
    }

    pub(crate) fn set_cwd(&self, p: Path) {
        let _g = plock(&self.lock);
        let guard = crate::sync::epoch::pin();
        self.cwd.replace(p, &guard);
        // The old cwd holds its mount (which a lazy umount may be waiting on): hand it to
        // the collector now rather than when this thread's bag fills.
        guard.flush();
    }

    /// Replaces the root (`set_fs_root`), for every task sharing this context.
    pub(crate) fn set_root(&self, p: Path) {
        let _g = plock(&self.lock);
        let guard = crate::sync::epoch::pin();
        self.root.replace(p, &guard);
        // As in `set_cwd`.
        guard.flush();
    }
}

/// A thread of a process, the subject of every syscall-shaped method.
///
/// # Threads
/// A `Task` is `Send` but not `Sync`: one OS thread uses it at a time, as a Linux thread
/// uses its own `task_struct` (the single-owner fast paths, such as `fdget` without a
/// reference on an unshared table, rest on it). A program that uses uvfs from several
/// threads gives each thread its own task:
/// - [`clone_thread`](Self::clone_thread) for threads of one "process" (one descriptor
///   table, one root/cwd/umask, one credentials object, as `CLONE_FILES | CLONE_FS`):
///   a descriptor one thread opens, the others see;
/// - [`fork`](Self::fork) for independent processes (a copy of the table: same open
///   files, separate descriptors).
///
/// To keep an open file in a struct, a channel or a `static`, or to share one between
/// threads, use an [`OpenFile`](crate::OpenFile) (it owns its reference and is
/// `Send + Sync`) rather than a descriptor number or an [`OwnedFd`](crate::OwnedFd),
/// which borrows its task.
/// ```
/// use std::io::{Read, Write};
/// use uvfs::{OpenFlags, Task};
///
/// let mnt = uvfs::tmpfs::mount(Default::default());
/// let main = Task::init(&mnt);
/// let log = main.open_file("/log", OpenFlags::CREAT | OpenFlags::WRONLY | OpenFlags::APPEND, 0o644)?;
/// let workers: Vec<_> = (0..2)
///     .map(|i| {
///         let me = main.clone_thread(); // this thread's own task, same process
///         let log = log.clone(); // the same open file, owned
///         std::thread::spawn(move || -> std::io::Result<()> {
///             me.root_dir()?.write(format!("out{i}"), "done")?; // paths relative to the Dir
///             (&log).write_all(format!("worker {i}\n").as_bytes())
///         })
///     })
///     .collect();
/// for w in workers {
///     w.join().unwrap()?;
/// }
/// let mut s = String::new();
/// main.open_file("/log", OpenFlags::RDONLY, 0)?.read_to_string(&mut s)?;
/// assert_eq!(s.lines().count(), 2);
/// assert_eq!(main.root_dir()?.read_to_string("out1")?, "done");
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # References
/// Linux `struct task_struct`; `fork(2)`, `clone(2)` (`CLONE_FILES`, `CLONE_FS`).
pub struct Task<V: Variant = Uvfs> {
    pub(crate) files: Arc<FdTable<V>>,
    pub(crate) fs: Arc<FsStruct>,
    pub(crate) cred: Cred,
    /// Which credentials object this task uses (Linux: the `struct cred` pointer, compared
    /// by `linkat`'s `AT_EMPTY_PATH` check against a file's `f_cred`): shared by
    /// `clone_thread`, new on `init`, `fork` (`copy_creds` prepares new credentials) and
    /// `set_cred`.
    pub(crate) cred_id: u64,
    /// `RLIMIT_FSIZE` in bytes (`u64::MAX` = `RLIM_INFINITY`), per process: shared by
    /// `clone_thread`, copied by `fork` (Linux: `signal->rlim`). Atomic; read by every write
    /// and growing truncate, written by `setrlimit_fsize`.
    pub(crate) rlim_fsize: Arc<AtomicU64>,
    /// This task's borrow slots in `files` (`FdTable::fdget_borrow`), registered the first
    /// time it `fdget`s the table while the table is shared; reset when `files` is replaced.
    borrow: OnceCell<Arc<BorrowSlots>>,
    pid: i32,
    _not_sync: PhantomData<Cell<()>>,
}

impl<V: Variant> fmt::Debug for Task<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task")
            .field("pid", &self.pid)
            .field("cred", &self.cred)
            .field("files", &self.files)
            .finish()
    }
}

impl Task {
    /// A first task: pid 1, root credentials, root and cwd at `mnt`'s root, umask `0o022`,
    /// an empty fd table. Its mount namespace is the one `mnt` is attached in (tasks made
    /// from the same mount share one, and see each other's mounts), or, for a mount never
    /// attached, a new one with `mnt` as its root mount. A mount unmounted since gets a new
    /// namespace rooted at a fresh mount of the same tree.
    pub fn init(mnt: &Arc<Mount>) -> Task {
        Self::with_cred(mnt, Cred::root())
    }

    /// Like [`init`](Self::init) with the given credentials.
    pub fn with_cred(mnt: &Arc<Mount>, cred: Cred) -> Task {
        Task::with_cred_variant(mnt, cred)
    }
}

impl<V: Variant> Task<V> {
    /// Like [`init`](Task::init) for a task whose files use the lessons' mechanisms of `V`
    /// (ablation benchmarks; see [`crate::variant`]). Its tasks and files are separate from
    /// those of other variants: descriptors do not pass between them.
    pub fn init_variant(mnt: &Arc<Mount>) -> Task<V> {
        Self::with_cred_variant(mnt, Cred::root())
    }

    /// Like [`with_cred`](Task::with_cred) for the variant `V`.
    pub fn with_cred_variant(mnt: &Arc<Mount>, cred: Cred) -> Task<V> {
        // A mount unmounted and released between the two steps: again (a fresh copy then).
        let (ns, root) = loop {
            let (ns, m) = MntNamespace::of(mnt);
            if let Some(root) = root_path(&m) {
                break (ns, root);
            }
        };
        Task {
            files: Arc::new(FdTable::new_variant()),
            fs: Arc::new(FsStruct {
                root: RcuCell::new(root.clone()),
                cwd: RcuCell::new(root),
                umask: AtomicU32::new(0o022),
                lock: Mutex::new(()),
                ns,
            }),
            cred,
            cred_id: new_cred_id(),
            rlim_fsize: Arc::new(AtomicU64::new(u64::MAX)),
            borrow: OnceCell::new(),
            pid: 1,
            _not_sync: PhantomData,
        }
    }

    /// `fork()`: a new process with a copy of this task's fd table (the same open files, one
    /// more reference each) and file-system context, the same credentials, a new pid.
    pub fn fork(&self) -> Task<V> {
        let guard = crate::sync::epoch::pin();
        Task {
            files: Arc::new(self.files.dup_fd()),
            fs: Arc::new(self.fs.copy(&guard)),
            cred: self.cred.clone(),
            cred_id: new_cred_id(),
            // Relaxed: a value copied at fork; no ordering with other data.
            rlim_fsize: Arc::new(AtomicU64::new(self.rlim_fsize.load(Ordering::Relaxed))),
            // Relaxed: only uniqueness matters; fork is not on a hot path.
            pid: NEXT_PID.fetch_add(1, Ordering::Relaxed),
            borrow: OnceCell::new(),
            _not_sync: PhantomData,
        }
    }

    /// `clone(CLONE_THREAD | CLONE_FILES | CLONE_FS)`: a new thread of this process sharing
    /// its fd table and file-system context (and pid, as `getpid` returns the thread group).
    pub fn clone_thread(&self) -> Task<V> {
        Task {
            files: self.files.clone(),
            fs: self.fs.clone(),
            cred: self.cred.clone(),
            cred_id: self.cred_id,
            rlim_fsize: self.rlim_fsize.clone(),
            borrow: OnceCell::new(),
            pid: self.pid,
            _not_sync: PhantomData,
        }
    }

    /// Replaces this task's credentials (as `setresuid`/`setresgid`/`setgroups` together).
    /// `&mut self`: every call reads the credentials as a plain field (Linux's
    /// `current_cred()` is likewise the task's own, replaced by `commit_creds`); a `Task`
    /// belongs to one thread, so the exclusive borrow costs its owner nothing.
    pub fn set_cred(&mut self, cred: Cred) {
        self.cred = cred;
        self.cred_id = new_cred_id();
    }

    /// This task's credential identity (Linux: the address of its `struct cred`): what a
    /// file opened by this task records as its opener's (`f_cred`) and
    /// `linkat(AT_EMPTY_PATH)` compares. Shared by `clone_thread`; new after `init`, `fork`
    /// and [`set_cred`](Self::set_cred).
    pub fn cred_id(&self) -> u64 {
        self.cred_id
    }

    /// Replaces this task's credentials with `cred` under identity `id`, one that
    /// [`cred_id`](Self::cred_id) gave for these same credentials: for a task that serves
    /// several threads in turn (uvfs run's supervisor), so that a thread whose credentials
    /// did not change keeps its identity between its calls, as a Linux thread keeps its
    /// `struct cred` until it commits new ones. An id given for other credentials would let
    /// `linkat(AT_EMPTY_PATH)` accept files those opened (no other check reads it).
    pub fn set_cred_with_id(&mut self, cred: Cred, id: u64) {
        self.cred = cred;
        self.cred_id = id;
    }

    /// `override_creds`: runs this task's next calls with `cred`, keeping its credential
    /// identity (no new id is drawn from the global counter `set_cred` uses). For the FUSE
    /// server, whose worker tasks take each request's caller's credentials: only
    /// `linkat(AT_EMPTY_PATH)` of a descriptor compares identities, and the server never
    /// makes one.
    #[cfg(feature = "fuse")]
    pub(crate) fn override_creds(&mut self, cred: Cred) {
        self.cred = cred;
    }

    /// The credentials.
    pub fn cred(&self) -> &Cred {
        &self.cred
    }

    /// The fd table.
    ///
    /// From the first call on, the table counts as shared (the reference may reach other
    /// threads without a `Task`): `read`, `write` and the other calls take a reference on
    /// the file for each call instead of borrowing it (Linux `fdget` vs `fget`).
    pub fn files(&self) -> &FdTable<V> {
        self.files.expose();
        &self.files
    }

    /// `getrlimit(RLIMIT_NOFILE)`: the descriptor limit of this task's table.
    pub fn getrlimit_nofile(&self) -> u32 {
        self.files.rlimit()
    }

    /// `setrlimit(RLIMIT_NOFILE)`: sets the descriptor limit of this task's table (shared
    /// with its threads). Unlike `files().set_rlimit`, this does not expose the table.
    ///
    /// # Errors
    /// `EPERM` above 2^20 (`nr_open`).
    pub fn setrlimit_nofile(&self, n: u32) -> Result<()> {
        self.files.set_rlimit(n)
    }

    /// `getrlimit(RLIMIT_FSIZE)`: the largest file size this process may create, in bytes
    /// (`u64::MAX` = `RLIM_INFINITY`, the default).
    pub fn getrlimit_fsize(&self) -> u64 {
        // Relaxed: an independent word (Linux reads rlimits with READ_ONCE).
        self.rlim_fsize.load(Ordering::Relaxed)
    }

    /// `setrlimit(RLIMIT_FSIZE)`: writes and truncates that would make a regular file larger
    /// than `bytes` fail with `EFBIG` (Linux also sends `SIGXFSZ`, which kills a process that
    /// does not catch it; uvfs has no signals and only returns the error, as for a process
    /// that ignores the signal). Shared with this task's threads, inherited by `fork`.
    /// Hard limits are not modelled: any value is accepted.
    ///
    /// # References
    /// setrlimit(2) `RLIMIT_FSIZE`; Linux `generic_write_check_limits`, `inode_newsize_ok`.
    pub fn setrlimit_fsize(&self, bytes: u64) {
        // Relaxed: see `getrlimit_fsize`.
        self.rlim_fsize.store(bytes, Ordering::Relaxed);
    }

    /// `unshare(CLONE_FILES)`: gives this task a private copy of a shared fd table.
    /// `&mut self`: it replaces the table pointer every descriptor call reads as a plain
    /// field ([`close_range`](Self::close_range)).
    pub fn unshare_files(&mut self) {
        if Arc::strong_count(&self.files) > 1 {
            self.files = Arc::new(self.files.dup_fd());
            self.borrow = OnceCell::new();
        }
    }

    /// `unshare(CLONE_FS)`: this task's working directory, root and umask become its own
    /// copy, no longer shared with the tasks it was cloned with (`unshare_fs`,
    /// kernel/fork.c). Writes nothing when they were not shared.
    pub fn unshare_fs(&mut self) {
        if Arc::strong_count(&self.fs) > 1 {
            let guard = crate::sync::epoch::pin();
            self.fs = Arc::new(self.fs.copy(&guard));
        }
    }

    /// `getpid()`: the process id (thread group id).
    pub fn getpid(&self) -> i32 {
        self.pid
    }

    /// Sets the process id [`getpid`](Self::getpid) returns and `F_GETLK` reports for this
    /// task's locks: for an embedder serving real processes (`uvfs run` gives each
    /// process's task its host pid). Tasks made by `clone_thread` afterwards share it;
    /// earlier ones keep theirs.
    pub fn set_pid(&mut self, pid: i32) {
        self.pid = pid;
    }

    /// `getuid()`: the real user id.
    pub fn getuid(&self) -> u32 {
        self.cred.ruid()
    }

    /// `getgid()`: the real group id.
    pub fn getgid(&self) -> u32 {
        self.cred.rgid()
    }

    /// `umask(mask)`: sets the file mode creation mask to `mask & 0o777`, returns the old one.
    /// The shared word is written only when the value changes (lesson 3: a store of the same
    /// value still steals the cache line).
    pub fn umask(&self, mask: u32) -> u32 {
        let mask = mask & 0o777;
        // Relaxed: the umask is an independent word; Linux uses a plain xchg with no
        // ordering duty towards other data.
        let old = self.fs.umask.load(Ordering::Relaxed);
        if old == mask {
            return old;
        }
        // Relaxed: as above.
        self.fs.umask.swap(mask, Ordering::Relaxed)
    }

    /// The current umask.
    pub(crate) fn current_umask(&self) -> u32 {
        // Relaxed: independent word.
        self.fs.umask.load(Ordering::Relaxed)
    }

    /// Whether other tasks share the fd table.
    #[inline]
    pub(crate) fn files_shared(&self) -> bool {
        Arc::strong_count(&self.files) > 1 || self.files.is_exposed()
    }

    /// The fd table for one call: private (its writers skip `file_lock`) when no other task
    /// shares it and it was never exposed, as [`fdget`](Self::fdget) decides.
    #[inline]
    pub(crate) fn fd_table(&self) -> crate::fdtable::FilesRef<'_, V> {
        if self.files_shared() {
            return self.files.shared();
        }
        // Acquire: the table was shared until its other users dropped their `Arc`s; pairs
        // with the Release decrement of `Arc::drop`, so their writes under `file_lock` are
        // visible to our writes without it.
        crate::sync::fence(crate::sync::Ordering::Acquire);
        // SAFETY: `files_shared()` is false: this task holds the only `Arc` (strong count 1;
        // it never lends the `Arc`, so no `Weak` exists) and the table was never exposed
        // (`files()` marks it). `Task` is `!Sync`, so only this thread can use `self`, and
        // the result borrows `self`: no `clone_thread` or `files()` can run while it lives.
        unsafe { self.files.private() }
    }

    /// `fdget`: the file at `fd` for one call; no reference taken if the table is private.
    /// `O_PATH` descriptors are refused: they only name a file (see
    /// [`fdget_raw`](Self::fdget_raw)).
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open or is an `O_PATH` descriptor.
    // Always: every descriptor call starts here, and the private path is a few loads.
    #[inline(always)]
    pub(crate) fn fdget(&self, fd: Fd) -> Result<FdRef<'_, V>> {
        let f = self.fdget_raw(fd)?;
        // FMODE_PATH files have `empty_fops`: every call through `fdget` is EBADF.
        if f.mode().contains(FMode::PATH) {
            return Err(crate::Errno::EBADF);
        }
        Ok(f)
    }

    /// `fdget_raw`: as [`fdget`](Self::fdget), `O_PATH` descriptors included (for `fstat`,
    /// `fstatfs`, a `dirfd`, `fchdir`, `dup2`, `fcntl`).
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open.
    // Always: as `fdget` (the shared path is out of line, `fdget_shared`).
    #[inline(always)]
    pub(crate) fn fdget_raw(&self, fd: Fd) -> Result<FdRef<'_, V>> {
        // The caller a file system that sends credentials on (FUSE) sees for this call.
        crate::cred::set_caller(&self.cred);
        if self.files_shared() {
            return self.fdget_shared(fd);
        }
        // SAFETY: `Task` is `!Sync` and owns `files`, whose `Arc` it never lends out (so no
        // `Weak` exists; `files()` lends `&FdTable` and marks it exposed). `files_shared()`
        // is false: no other task holds the table (strong count 1) and no bare reference
        // escaped (not exposed); so only this thread can close, replace or grow it, and no
        // method of `Task` closes `fd` while it holds the result.
        unsafe { self.files.fdget(fd.0, false) }
    }

    /// `fdget_raw` of a shared table: a borrow through this task's borrow slots, or (the
    /// `counted-fget` variant) a counted `fget`. Out of line, so that the private path
    /// above stays small enough to inline into every descriptor call.
    #[inline(never)]
    fn fdget_shared(&self, fd: Fd) -> Result<FdRef<'_, V>> {
        if !V::FGET_BORROW {
            return self.files.fget(fd.0).map(FdRef::Owned);
        }
        let b = self.borrow.get_or_init(|| self.files.register_borrower());
        // SAFETY: `b` was registered in `self.files` (reset whenever `files` is replaced),
        // and only this task publishes in it: `Task` is `!Sync` and never lends `borrow`.
        unsafe { self.files.fdget_borrow(fd.0, b) }
    }
}
