//! The kernel peer: the same workloads through real Linux system calls
//! (rustix, no libc), on a host directory, side by side with uvfs in the same
//! run.
//!
//! UnixBench runs its copies as separate processes. Here each worker is a
//! thread that first calls `unshare(CLONE_FILES | CLONE_FS)`, which gives it
//! what `fork` would: a private copy of the fd table (the shared open file
//! keeps its fd number and is still one `struct file`, as fd 0 is after
//! fork) and a private umask and cwd. So `close(dup(fd))` contends only on
//! the shared file's reference count, as in UnixBench, and not on a shared
//! fd table.
//!
//! `fstat-shared` and `read-shared` measure the other case, will-it-scale's
//! threads of one process: their workers do not unshare anything, so they
//! share this process's fd table and every `fstat`/`pread` on the shared fd
//! takes a reference on its file (a shared table defeats `fdget`'s
//! single-owner shortcut). That needs no `unsafe`: the fd is opened by the
//! main thread in setup and closed only in teardown, after `measure` has
//! joined every worker (the workers borrow it from the run, so it cannot go
//! earlier). `open-close` unshares as above and then `fchdir`s into the
//! run's directory, so every worker opens its own `f<thread>` relative to
//! its private cwd.
//!
//! The host directory is, by default, a tmpfs mounted on a fresh temporary
//! directory (we usually run as root), in a private mount namespace when
//! possible so that it cannot outlive the process; else (not root) a fresh
//! directory in `/dev/shm`, itself a tmpfs; else the temporary directory
//! itself. `--host-dir DIR` uses a fresh subdirectory of DIR instead. It is
//! unmounted and removed when the [`HostDir`] is closed or dropped, also on
//! error or interruption (see [`crate::interrupt`]). The `tree` workload's
//! files are copied into it once, so (on a tmpfs) both sides read files
//! from memory.
//!
//! The same target runs the workloads in a FUSE mount: [`KernelTarget::on`]
//! takes any [`KernelDir`], and `uvfs bench --target mount` gives it a
//! `uvfs mount` (see [`crate::uvfs_mount`]) or libfuse's `passthrough_ll`
//! (see [`crate::passthrough_ll`]) in place of the tmpfs.

use std::cell::Cell;
use std::ffi::{CStr, CString};
use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

use rustix::fs::{AtFlags, Mode, OFlags, Timespec, Timestamps};
use rustix::thread::UnshareFlags;

use rustix::io::Errno;

use crate::calls::{Calls, Open, Stat};
use crate::error::{Context, Error, Result};
use crate::loops;
use crate::target::{Target, Worker};
use crate::workloads::{open_close_name, shared_contents, STAT_PATH, STAT_PATH_DIRS};
use crate::workloads::{HostTree, SinkResult, TreeSink, Workload, DIR_MODE, FILE_MODE};

/// The host directory the kernel peer works in: a fresh temporary directory,
/// with a tmpfs mounted on it when possible, removed (and unmounted) on
/// [`HostDir::close`] or drop.
#[derive(Debug)]
pub struct HostDir {
    /// The directory; `None` once closed.
    dir: Option<tempfile::TempDir>,
    /// Whether we mounted a tmpfs on `dir` (and so must unmount it).
    mounted: bool,
    /// What it is, for the output, e.g. "tmpfs mounted at /tmp/uvfs-bench-x".
    description: String,
}

impl HostDir {
    /// Creates the kernel peer's directory.
    ///
    /// - `Some(parent)`: a fresh `uvfs-bench-*` directory inside `parent`
    ///   (its file system is named in the description).
    /// - `None`: a fresh temporary directory with a tmpfs mounted on it; if
    ///   the mount fails (not root, no `CAP_SYS_ADMIN`), a fresh directory in
    ///   `/dev/shm` (a tmpfs anyone may usually write to), else the temporary
    ///   directory itself; the description says which and why.
    ///
    /// # Errors
    ///
    /// The directory cannot be created.
    pub fn create(parent: Option<&Path>) -> Result<HostDir> {
        let builder = {
            let mut b = tempfile::Builder::new();
            b.prefix("uvfs-bench-");
            b
        };
        if let Some(parent) = parent {
            let dir = builder.tempdir_in(parent).with_context(|| {
                format!("--host-dir {}: creating a directory", parent.display())
            })?;
            let description = format!(
                "directory {} ({})",
                dir.path().display(),
                fs_name(dir.path())
            );
            return Ok(HostDir {
                dir: Some(dir),
                mounted: false,
                description,
            });
        }
        let mut dir = builder
            .tempdir()
            .with_context(|| "creating a temporary directory for the kernel peer")?;
        // In a private mount namespace the tmpfs vanishes with the process
        // even when it is killed (Ctrl-C) before it can unmount.
        let private = private_mount_namespace();
        let mounted = rustix::mount::mount(
            "uvfs-bench",
            dir.path(),
            "tmpfs",
            rustix::mount::MountFlags::NOSUID | rustix::mount::MountFlags::NODEV,
            Some(c"mode=0700"),
        );
        let description = match (mounted, private) {
            (Ok(()), Ok(())) => format!(
                "tmpfs mounted at {} (in a private mount namespace)",
                dir.path().display()
            ),
            (Ok(()), Err(e)) => format!(
                "tmpfs mounted at {} (no private mount namespace: {e})",
                dir.path().display()
            ),
            (Err(e), _) => match builder.tempdir_in("/dev/shm") {
                Ok(shm) => {
                    // The first directory is removed as it drops.
                    dir = shm;
                    format!(
                        "directory {} ({}; mounting a tmpfs failed: {e})",
                        dir.path().display(),
                        fs_name(dir.path())
                    )
                }
                Err(shm) => format!(
                    "temporary directory {} ({}; mounting a tmpfs failed: {e}; /dev/shm: {shm})",
                    dir.path().display(),
                    fs_name(dir.path())
                ),
            },
        };
        Ok(HostDir {
            dir: Some(dir),
            mounted: mounted.is_ok(),
            description,
        })
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        self.dir.as_ref().map_or(Path::new(""), |d| d.path())
    }

    /// What the directory is, for the output.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Unmounts (if mounted) and removes the directory, reporting failures.
    /// All fds into it should be closed first.
    ///
    /// # Errors
    ///
    /// The tmpfs cannot be unmounted even lazily, or the directory cannot be
    /// removed.
    pub fn close(mut self) -> Result<()> {
        self.release()
    }

    /// Unmounts and removes; idempotent (the second call does nothing).
    fn release(&mut self) -> Result<()> {
        let Some(dir) = self.dir.take() else {
            return Ok(());
        };
        if std::mem::take(&mut self.mounted) {
            // EBUSY: a worker thread that just exited may still hold its
            // unshared fd table (or, in open-close, its private cwd) for a
            // moment (the kernel wakes joiners before it drops the thread's
            // files and fs); detach lazily then.
            if rustix::mount::unmount(dir.path(), rustix::mount::UnmountFlags::empty()).is_err() {
                rustix::mount::unmount(dir.path(), rustix::mount::UnmountFlags::DETACH)
                    .with_context(|| format!("unmounting the tmpfs at {}", dir.path().display()))?;
            }
        }
        let path = dir.path().to_path_buf();
        dir.close()
            .with_context(|| format!("removing {}", path.display()))
    }
}

impl Drop for HostDir {
    fn drop(&mut self) {
        // Best effort on the error path; `close` reports failures.
        let _ = self.release();
    }
}

/// The directory a [`KernelTarget`] works in: a [`HostDir`], or a FUSE
/// mount (`uvfs mount`, `passthrough_ll`) whose server it owns.
pub trait KernelDir: fmt::Debug {
    /// The directory's path; the target makes its runs' directories in it.
    fn path(&self) -> &Path;

    /// What it is, for the output, e.g. "tmpfs mounted at /tmp/uvfs-bench-x".
    fn description(&self) -> String;

    /// Releases it (unmounts, stops its server, removes it), reporting
    /// failures. Every fd into it is closed first.
    ///
    /// # Errors
    ///
    /// Releasing failed, with context.
    fn close(self: Box<Self>) -> Result<()>;
}

impl KernelDir for HostDir {
    fn path(&self) -> &Path {
        HostDir::path(self)
    }

    fn description(&self) -> String {
        HostDir::description(self).to_owned()
    }

    fn close(self: Box<Self>) -> Result<()> {
        HostDir::close(*self)
    }
}

thread_local! {
    /// The result of this thread's [`private_mount_namespace`] call, once made.
    static PRIVATE_NAMESPACE: Cell<Option<rustix::io::Result<()>>> = const { Cell::new(None) };
}

/// Moves the calling thread (the main thread, before any worker exists)
/// into a new mount namespace whose mounts do not propagate back, so a
/// tmpfs mounted afterwards is seen only by this process and its later
/// threads, and is gone when the process exits, however it exits.
///
/// Also for a thread of its own in a process that has others (`uvfs mount`
/// mounts fusectl in one to abort its connection): only the calling thread
/// moves.
///
/// Once per thread: later calls return the first call's result and stay in
/// that namespace. A second `unshare` would copy the mounts made so far into
/// a new namespace, and a FUSE server started before it (a child process,
/// in the first namespace) could not unmount the copy: its mount point
/// could then not be removed.
pub fn private_mount_namespace() -> rustix::io::Result<()> {
    PRIVATE_NAMESPACE.with(|done| {
        if let Some(result) = done.get() {
            return result;
        }
        let result = enter_private_mount_namespace();
        done.set(Some(result));
        result
    })
}

/// [`private_mount_namespace`]'s first call: `unshare(CLONE_NEWNS)` and
/// make every mount private.
fn enter_private_mount_namespace() -> rustix::io::Result<()> {
    // SAFETY: the hazard of `unshare_unsafe` is CLONE_FILES (fds that other
    // threads cannot see); CLONE_NEWNS and the CLONE_FS it implies change
    // only this thread's mount namespace, cwd, root and umask, which other
    // threads do not rely on. Paths stay valid: the new namespace starts as
    // a copy of the old one.
    unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNS) }?;
    rustix::mount::mount_change(
        "/",
        rustix::mount::MountPropagationFlags::PRIVATE | rustix::mount::MountPropagationFlags::REC,
    )
}

/// The file system type of `path`, by `statfs` magic, for the output.
pub(crate) fn fs_name(path: &Path) -> String {
    let Ok(st) = rustix::fs::statfs(path) else {
        return "file system unknown".to_owned();
    };
    #[allow(clippy::unnecessary_cast)] // f_type's width differs by arch.
    let magic = st.f_type as u64 & 0xffff_ffff;
    let name = match magic {
        0x0102_1994 => "tmpfs",
        0xef53 => "ext4",
        0x9123_683e => "btrfs",
        0x5846_5342 => "xfs",
        0x794c_7630 => "overlayfs",
        0x2fc1_2fc1 => "zfs",
        0x6573_5546 => "fuse",
        0x0102_1997 => "9p",
        _ => return format!("file system magic {magic:#x}"),
    };
    name.to_owned()
}

/// The kernel peer as a [`Target`]: Linux system calls on a [`HostDir`], or
/// on another [`KernelDir`] such as a FUSE mount.
#[derive(Debug)]
pub struct KernelTarget {
    /// The target's name: `kernel`, or the FUSE server's (`mount`,
    /// `passthrough-ll`).
    name: String,
    /// The current run's shared state; `None` between runs.
    run: Option<KernelRun>,
    /// The imported tree, once a `tree` run has needed it.
    tree: Option<KernelTree>,
    /// The directory, opened; dropped before `host`.
    root: OwnedFd,
    /// Runs set up so far, to name each run's directory.
    runs: u64,
    /// Trees imported so far, to name each tree's directory.
    trees: u64,
    /// The directory; last so the fds above close before it goes.
    host: Box<dyn KernelDir>,
}

/// One run's shared state, opened by the main thread before the workers
/// unshare their fd tables (so the fd numbers are valid in every copy).
#[derive(Debug)]
struct KernelRun {
    /// Name of the run's directory under the host directory, e.g. `run3`.
    name: CString,
    /// The run's directory.
    dir: OwnedFd,
    /// The shared open file (`syscall`, `futimes`, `fstat-shared`,
    /// `read-shared`), named `shared` in `dir`.
    shared: Option<OwnedFd>,
    /// Whether `dir/shared` was (being) created, so teardown unlinks it.
    shared_created: bool,
    /// `open-close`'s files `f0`, `f1`, ... created in `dir` so far.
    own_files: usize,
    /// `stat-path`'s directories ([`STAT_PATH_DIRS`]) and then its file created in `dir`
    /// so far (0 to 4).
    stat_path: usize,
}

/// The tree imported into the host directory.
#[derive(Debug)]
struct KernelTree {
    /// What was imported (compared by pointer to know if a run's tree is it).
    source: Arc<HostTree>,
    /// The tree's directory.
    dir: OwnedFd,
    /// The regular files' paths relative to `dir`, in `source.files` order.
    paths: Vec<CString>,
    /// Their sizes, same order.
    sizes: Vec<u64>,
}

impl KernelTarget {
    /// Opens the kernel peer, named `kernel`, on `host`.
    ///
    /// # Errors
    ///
    /// The directory cannot be opened.
    pub fn new(host: HostDir) -> Result<KernelTarget> {
        KernelTarget::on("kernel", Box::new(host))
    }

    /// Opens a target named `name` that runs the workloads through system
    /// calls in `dir` (a FUSE mount, say); closing the target closes `dir`,
    /// after every fd into it. On error `dir` is dropped (released).
    ///
    /// # Errors
    ///
    /// The directory cannot be opened.
    pub fn on(name: &str, host: Box<dyn KernelDir>) -> Result<KernelTarget> {
        let root = rustix::fs::open(
            host.path(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .with_context(|| format!("{name}: opening {}", host.path().display()))?;
        Ok(KernelTarget {
            name: name.to_owned(),
            run: None,
            tree: None,
            root,
            runs: 0,
            trees: 0,
            host,
        })
    }

    /// Copies `source` into a new directory `treeN` under the host directory
    /// and checks every file reads back as on the host.
    fn import_tree(&mut self, source: &Arc<HostTree>) -> Result<()> {
        let who = self.name.clone();
        self.trees += 1;
        let name = format!("tree{}", self.trees);
        rustix::fs::mkdirat(&self.root, name.as_str(), Mode::from_raw_mode(DIR_MODE))
            .with_context(|| format!("{who}: mkdirat({name})"))?;
        let dir = rustix::fs::openat(
            &self.root,
            name.as_str(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .with_context(|| format!("{who}: open({name})"))?;
        source.import(
            &mut KernelSink { dir: dir.as_fd() },
            &format!("{who} {name}"),
        )?;
        let paths = source
            .file_paths()
            .map(|p| CString::new(p).map_err(|e| Error::new(format!("{who}: tree path"), e)))
            .collect::<Result<Vec<_>>>()?;
        let sizes = source.file_sizes().collect();
        self.tree = Some(KernelTree {
            source: Arc::clone(source),
            dir,
            paths,
            sizes,
        });
        Ok(())
    }
}

/// The kernel's calls for [`HostTree::import`], relative to the tree's
/// directory.
#[derive(Debug)]
struct KernelSink<'a> {
    /// The tree's directory.
    dir: BorrowedFd<'a>,
}

impl TreeSink for KernelSink<'_> {
    type File = OwnedFd;

    fn mkdir(&mut self, rel: &[u8], mode: u32) -> SinkResult<()> {
        Ok(rustix::fs::mkdirat(
            self.dir,
            rel,
            Mode::from_raw_mode(mode),
        )?)
    }

    fn create(&mut self, rel: &[u8], mode: u32) -> SinkResult<OwnedFd> {
        let flags = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC;
        Ok(rustix::fs::openat(
            self.dir,
            rel,
            flags,
            Mode::from_raw_mode(mode),
        )?)
    }

    fn open(&mut self, rel: &[u8]) -> SinkResult<OwnedFd> {
        let flags = OFlags::RDONLY | OFlags::CLOEXEC;
        Ok(rustix::fs::openat(self.dir, rel, flags, Mode::empty())?)
    }

    fn write(&mut self, file: &OwnedFd, data: &[u8]) -> SinkResult<usize> {
        Ok(rustix::io::write(file, data)?)
    }

    fn read(&mut self, file: &OwnedFd, buf: &mut [u8]) -> SinkResult<usize> {
        Ok(rustix::io::read(file, buf)?)
    }

    fn close(&mut self, file: OwnedFd) -> SinkResult<()> {
        drop(file);
        Ok(())
    }

    fn symlink(&mut self, target: &[u8], rel: &[u8]) -> SinkResult<()> {
        Ok(rustix::fs::symlinkat(target, self.dir, rel)?)
    }
}

impl Target for KernelTarget {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        format!(
            "Linux syscalls via rustix on {}; each thread unshare(CLONE_FILES|CLONE_FS) like a forked \
             process; fstat-shared, read-shared: threads sharing this process's fd table",
            self.host.description()
        )
    }

    fn setup(&mut self, workload: &Workload, threads: usize) -> Result<Vec<Box<dyn Worker + '_>>> {
        if let Workload::Tree(source) = workload {
            if !self
                .tree
                .as_ref()
                .is_some_and(|t| Arc::ptr_eq(&t.source, source))
            {
                self.import_tree(source)?;
            }
        }
        // For messages, apart from `self` (borrowed by the run below).
        let who = self.name.clone();
        self.runs += 1;
        let name = CString::new(format!("run{}", self.runs))
            .map_err(|e| Error::new(format!("{who}: run directory name"), e))?;
        rustix::fs::mkdirat(&self.root, &name, Mode::from_raw_mode(DIR_MODE))
            .with_context(|| format!("{who}: mkdirat({name:?})"))?;
        let dir = rustix::fs::openat(
            &self.root,
            &name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .with_context(|| format!("{who}: open({name:?})"))?;
        let run = self.run.insert(KernelRun {
            name,
            dir,
            shared: None,
            shared_created: false,
            own_files: 0,
            stat_path: 0,
        });
        if matches!(workload, Workload::FstatShared | Workload::ReadShared) {
            run.shared_created = true;
            create_file(run.dir.as_fd(), c"shared", &shared_contents())?;
            let f = rustix::fs::openat(
                &run.dir,
                c"shared",
                OFlags::RDONLY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .with_context(|| format!("{who}: open(shared)"))?;
            run.shared = Some(f);
        }
        if matches!(workload, Workload::OpenClose) {
            for index in 0..threads {
                let name = CString::new(open_close_name(index))
                    .map_err(|e| Error::new(format!("{who}: open-close file name"), e))?;
                create_file(run.dir.as_fd(), &name, &[])?;
                run.own_files += 1;
            }
        }
        if matches!(workload, Workload::StatPath) {
            for d in STAT_PATH_DIRS {
                rustix::fs::mkdirat(&run.dir, d, Mode::from_raw_mode(DIR_MODE))
                    .with_context(|| format!("{who}: mkdirat({d})"))?;
                run.stat_path += 1;
            }
            let file = CString::new(STAT_PATH)
                .map_err(|e| Error::new(format!("{who}: stat-path file name"), e))?;
            create_file(run.dir.as_fd(), &file, &[])?;
            run.stat_path += 1;
        }
        if matches!(workload, Workload::Syscall | Workload::Futimes) {
            run.shared_created = true;
            let f = rustix::fs::openat(
                &run.dir,
                c"shared",
                OFlags::CREATE | OFlags::RDWR | OFlags::CLOEXEC,
                Mode::from_raw_mode(FILE_MODE),
            )
            .with_context(|| format!("{who}: open(shared)"))?;
            run.shared = Some(f);
        }
        let run: &KernelRun = run;
        let tree = self.tree.as_ref();
        let mut workers: Vec<Box<dyn Worker + '_>> = Vec::with_capacity(threads);
        for index in 0..threads {
            let shared = || {
                run.shared
                    .as_ref()
                    .map(|f| f.as_fd())
                    .ok_or_else(|| Error::msg(format!("{who}: shared file not open")))
            };
            let private = KernelCalls::private(None);
            workers.push(match workload {
                Workload::Syscall => Box::new(loops::Syscall::new(&who, private, shared()?)),
                Workload::CreatClo => {
                    Box::new(loops::CreatClo::new(&who, private, run.dir.as_fd(), index))
                }
                Workload::Futimes => Box::new(loops::Futimes::new(&who, private, shared()?)),
                Workload::Tree(_) => {
                    let tree =
                        tree.ok_or_else(|| Error::msg(format!("{who}: tree not imported")))?;
                    Box::new(loops::Tree::new(
                        &who,
                        private,
                        tree.dir.as_fd(),
                        &tree.paths,
                        &tree.sizes,
                        index,
                    ))
                }
                Workload::FstatShared => Box::new(loops::FstatShared::new(
                    &who,
                    KernelCalls::shared_table(),
                    shared()?,
                )),
                Workload::ReadShared => Box::new(loops::ReadShared::new(
                    &who,
                    KernelCalls::shared_table(),
                    shared()?,
                )),
                Workload::OpenClose => Box::new(loops::OpenClose::new(
                    &who,
                    KernelCalls::private(Some(run.dir.as_fd())),
                    CString::new(open_close_name(index))
                        .map_err(|e| Error::new(format!("{who}: open-close file name"), e))?,
                )),
                Workload::StatPath => Box::new(loops::StatPath::new(
                    &who,
                    private,
                    run.dir.as_fd(),
                    CString::new(STAT_PATH)
                        .map_err(|e| Error::new(format!("{who}: stat-path file name"), e))?,
                )),
            });
        }
        Ok(workers)
    }

    fn teardown(&mut self) -> Result<()> {
        let Some(run) = self.run.take() else {
            return Ok(());
        };
        let who = &self.name;
        let KernelRun {
            name,
            dir,
            shared,
            shared_created,
            own_files,
            stat_path,
        } = run;
        // Closed only now: every worker that used it has exited (see the
        // module doc).
        drop(shared);
        if shared_created {
            rustix::fs::unlinkat(&dir, c"shared", AtFlags::empty())
                .with_context(|| format!("{who}: unlink({name:?}/shared)"))?;
        }
        for index in 0..own_files {
            let file = open_close_name(index);
            rustix::fs::unlinkat(&dir, file.as_str(), AtFlags::empty())
                .with_context(|| format!("{who}: unlink({name:?}/{file})"))?;
        }
        if stat_path > STAT_PATH_DIRS.len() {
            rustix::fs::unlinkat(&dir, STAT_PATH, AtFlags::empty())
                .with_context(|| format!("{who}: unlink({name:?}/{STAT_PATH})"))?;
        }
        for d in STAT_PATH_DIRS[..stat_path.min(STAT_PATH_DIRS.len())]
            .iter()
            .rev()
        {
            rustix::fs::unlinkat(&dir, *d, AtFlags::REMOVEDIR)
                .with_context(|| format!("{who}: rmdir({name:?}/{d})"))?;
        }
        drop(dir);
        // ENOTEMPTY here means a workload left files behind (creat-clo must
        // unlink every file it creates).
        rustix::fs::unlinkat(&self.root, &name, AtFlags::REMOVEDIR)
            .with_context(|| format!("{who}: rmdir({name:?}) after the run"))
    }

    fn close(self: Box<Self>) -> Result<()> {
        let KernelTarget {
            run,
            tree,
            root,
            host,
            ..
        } = *self;
        // Every fd into the host directory goes before it is unmounted.
        drop(run);
        drop(tree);
        drop(root);
        host.close()
    }
}

/// Creates the file `name` in `dir` (it must not exist) and writes `data`
/// into it.
fn create_file(dir: BorrowedFd<'_>, name: &CStr, data: &[u8]) -> Result<()> {
    let flags = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC;
    let f = rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(FILE_MODE))
        .with_context(|| format!("kernel: create({name:?})"))?;
    let mut written = 0;
    while written < data.len() {
        let n = rustix::io::write(&f, &data[written..])
            .with_context(|| format!("kernel: write({name:?})"))?;
        if n == 0 {
            return Err(Error::msg(format!("kernel: write({name:?}) wrote nothing")));
        }
        written += n;
    }
    Ok(())
}

/// Gives the calling worker thread what `fork` gives a process: a private
/// copy of the fd table and of the fs context (umask, cwd).
fn enter_private() -> Result<()> {
    // SAFETY: `unshare(CLONE_FILES)` requires that no thread observe a file
    // descriptor from another thread's table. This worker uses only (a) fds
    // the main thread opened before spawning it, which are in the copied
    // table under the same numbers and which the target keeps open in the
    // main table until every worker is dropped, and (b) fds it creates
    // itself, which it closes on this thread before returning from `run`.
    // It never passes an fd to another thread.
    unsafe { rustix::thread::unshare_unsafe(UnshareFlags::FILES | UnshareFlags::FS) }
        .with_context(|| "kernel: unshare(CLONE_FILES | CLONE_FS)")
}

/// The kernel's [`Calls`]: each call the system call of the same name through rustix, on
/// the calling worker thread.
///
/// A worker that stands for a process of its own (every workload but `fstat-shared` and
/// `read-shared`) first unshares its fd table and fs context (`enter_private`), and for
/// `open-close` moves its private cwd into the run's directory; the others are threads of
/// this process, sharing its fd table (see the module doc).
#[derive(Debug)]
pub struct KernelCalls<'a> {
    /// Unshare the fd table and fs context in `enter` (a forked process's view).
    private: bool,
    /// Make this directory the (private) cwd in `enter`.
    cwd: Option<BorrowedFd<'a>>,
}

impl<'a> KernelCalls<'a> {
    /// The calls of a worker that is a process of its own (a private fd table, umask and
    /// cwd, as after `fork`), its cwd moved to `cwd` if given.
    pub fn private(cwd: Option<BorrowedFd<'a>>) -> Self {
        KernelCalls { private: true, cwd }
    }

    /// The calls of a worker that is a thread of this process (its fd table shared).
    pub fn shared_table() -> Self {
        KernelCalls {
            private: false,
            cwd: None,
        }
    }
}

/// rustix's `Stat` as the workloads check it.
#[inline]
fn stat(st: rustix::fs::Stat) -> Stat {
    Stat {
        mode: st.st_mode,
        size: st.st_size,
    }
}

impl<'a> Calls for KernelCalls<'a> {
    type Fd = OwnedFd;
    type At = BorrowedFd<'a>;
    type Path = CStr;
    type Times = Timestamps;
    type Error = rustix::io::Errno;

    fn enter(&mut self) -> Result<()> {
        if self.private {
            enter_private()?;
        }
        if let Some(dir) = self.cwd {
            // Private fs context first (above): the `fchdir` must not move the process's
            // (the main thread's) cwd.
            rustix::process::fchdir(dir).with_context(|| "kernel: fchdir(run dir)")?;
        }
        Ok(())
    }

    fn times((tv_sec, tv_nsec): (i64, i64)) -> Timestamps {
        Timestamps {
            last_access: Timespec { tv_sec, tv_nsec },
            last_modification: Timespec { tv_sec, tv_nsec },
        }
    }

    #[inline]
    fn dup(&self, fd: BorrowedFd<'a>) -> std::result::Result<OwnedFd, Errno> {
        rustix::io::dup(fd)
    }

    #[inline]
    fn close(&self, fd: OwnedFd) -> std::result::Result<(), Errno> {
        // close(2); UnixBench ignores its result too, and it cannot fail on an fd we just
        // got.
        drop(fd);
        Ok(())
    }

    #[inline]
    fn getpid(&self) -> std::result::Result<u32, Errno> {
        // A pid is positive: the cast keeps its value.
        Ok(rustix::process::getpid().as_raw_nonzero().get() as u32)
    }

    #[inline]
    fn getuid(&self) -> std::result::Result<u32, Errno> {
        Ok(rustix::process::getuid().as_raw())
    }

    #[inline]
    fn umask(&self, mask: u32) -> std::result::Result<u32, Errno> {
        Ok(rustix::process::umask(Mode::from_raw_mode(mask)).as_raw_mode())
    }

    #[inline]
    fn openat(
        &self,
        dir: Option<BorrowedFd<'a>>,
        path: &CStr,
        how: Open,
    ) -> std::result::Result<OwnedFd, Errno> {
        let dir = dir.unwrap_or(rustix::fs::CWD);
        match how {
            Open::Read => rustix::fs::openat(dir, path, OFlags::RDONLY, Mode::empty()),
            Open::CreateTrunc => rustix::fs::openat(
                dir,
                path,
                OFlags::CREATE | OFlags::WRONLY | OFlags::TRUNC,
                Mode::from_raw_mode(FILE_MODE),
            ),
        }
    }

    #[inline]
    fn unlinkat(&self, dir: BorrowedFd<'a>, path: &CStr) -> std::result::Result<(), Errno> {
        rustix::fs::unlinkat(dir, path, AtFlags::empty())
    }

    #[inline]
    fn fstat(&self, fd: BorrowedFd<'a>) -> std::result::Result<Stat, Errno> {
        rustix::fs::fstat(fd).map(stat)
    }

    #[inline]
    fn fstatat(
        &self,
        dir: Option<BorrowedFd<'a>>,
        path: &CStr,
    ) -> std::result::Result<Stat, Errno> {
        rustix::fs::statat(dir.unwrap_or(rustix::fs::CWD), path, AtFlags::empty()).map(stat)
    }

    #[inline]
    fn read(&self, fd: &mut OwnedFd, buf: &mut [u8]) -> std::result::Result<usize, Errno> {
        rustix::io::read(fd, buf)
    }

    #[inline]
    fn pread(
        &self,
        fd: BorrowedFd<'a>,
        buf: &mut [u8],
        off: u64,
    ) -> std::result::Result<usize, Errno> {
        rustix::io::pread(fd, buf, off)
    }

    #[inline]
    fn futimens(&self, fd: BorrowedFd<'a>, times: &Timestamps) -> std::result::Result<(), Errno> {
        rustix::fs::futimens(fd, times)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every workload runs on the kernel peer with 1 and 2 threads, its
    /// teardown checks pass, and the host directory is removed at the end.
    #[test]
    fn runs_every_workload_and_cleans_up() {
        let parent = tempfile::tempdir().unwrap();
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir(src.path().join("sub")).unwrap();
        std::fs::write(src.path().join("sub/a.h"), vec![7u8; 100_000]).unwrap();
        std::fs::write(src.path().join("b.h"), b"int b;").unwrap();
        std::fs::write(src.path().join("empty.h"), b"").unwrap();
        std::os::unix::fs::symlink("b.h", src.path().join("c.h")).unwrap();
        let tree = Arc::new(HostTree::read(src.path()).unwrap());

        let host = HostDir::create(Some(parent.path())).unwrap();
        let host_path = host.path().to_path_buf();
        let mut target: Box<dyn Target> = Box::new(KernelTarget::new(host).unwrap());
        crate::harness::run_every_workload(target.as_mut(), tree);
        // Only the imported tree is left between runs.
        let left: Vec<_> = std::fs::read_dir(&host_path)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["tree1"]);
        target.close().unwrap();
        assert!(!host_path.exists());
    }

    /// Leftover files fail the teardown (the creat-clo check).
    #[test]
    fn teardown_fails_on_leftovers() {
        let parent = tempfile::tempdir().unwrap();
        let host = HostDir::create(Some(parent.path())).unwrap();
        let host_path = host.path().to_path_buf();
        let mut target = KernelTarget::new(host).unwrap();
        drop(target.setup(&Workload::CreatClo, 1).unwrap());
        std::fs::write(host_path.join("run1/stray"), b"").unwrap();
        let e = target.teardown().unwrap_err().to_string();
        assert!(e.contains("rmdir"), "{e}");
    }
}
