//! uvfs as a [`Target`]: the workloads on the embedded tmpfs, through
//! `uvfs::Task`'s syscall-shaped methods.
//!
//! Every run forks a parent task from `init`; the parent opens the shared
//! file or directory as fd 0, then forks one task per worker, so every
//! worker's fd 0 is the same shared `File` (as after fork in UnixBench).
//! Each worker thread owns its task (a `Task` is `Send` but not `Sync`).
//!
//! `fstat-shared` and `read-shared` instead make each worker a
//! `clone_thread` of the parent: threads of one process sharing its fd
//! table, so every call takes a reference on the shared `File` (the
//! contended path they measure). `open-close` forks as above, with the
//! parent's cwd set to the run's directory first, so every worker opens its
//! own `f<thread>` relative to the cwd.
//!
//! Layout in the mount: `/bench/runN` per run, `/treeN` per imported tree.

use std::hint::black_box;
use std::sync::Arc;

use ::uvfs::variant::{Uvfs, Variant};
use ::uvfs::{AtFlags, Fd, Mount, OpenFlags, Task, Timespec};

use crate::error::{Context, Error, Result};
use crate::target::{Target, Worker};
use crate::workloads::{
    open_close_name, read_shared_offset, shared_byte, shared_contents, READ_SHARED_LEN,
    SHARED_FILE_SIZE,
};
use crate::workloads::{
    thread_order, HostTree, NameBuf, ReadBuf, SinkResult, TreeSink, Workload, DIR_MODE, FILE_MODE,
    FUTIMES_TIMES, S_IFMT, S_IFREG,
};

/// uvfs on an embedded tmpfs, as a [`Target`].
#[derive(Debug)]
pub struct UvfsTarget<V: Variant = Uvfs> {
    /// The current run's parent task and names; `None` between runs.
    run: Option<UvfsRun<V>>,
    /// The imported tree, once a `tree` run has needed it.
    tree: Option<UvfsTree>,
    /// pid 1: creates the directories, imports trees, forks run parents.
    init: Task<V>,
    /// Runs set up so far, to name each run's directory.
    runs: u64,
    /// Trees imported so far, to name each tree's directory.
    trees: u64,
    /// `uvfs`, or `uvfs[<variant>]` for an ablation variant.
    name: String,
    /// The file system everything lives on (tmpfs, or hostfs over `host`).
    _mount: Arc<Mount>,
    /// For `uvfs-hostfs`: the host directory hostfs is bound to, closed after the mount.
    host: Option<crate::kernel::HostDir>,
    /// Where imported trees go: `` (the root) or, for a FUSE client target, `/bench` (so
    /// that `tree` reads through the client).
    tree_base: &'static str,
    /// A description replacing the built-in one (FUSE client targets).
    desc: Option<String>,
    /// Run after every task and the mount are gone (a FUSE client target's server).
    cleanup: Option<Cleanup>,
}

/// What a target runs at its close, after its mount went.
pub struct Cleanup(pub Box<dyn FnOnce() -> Result<()>>);

impl std::fmt::Debug for Cleanup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cleanup")
    }
}

/// One run's shared state.
#[derive(Debug)]
struct UvfsRun<V: Variant> {
    /// The run's directory, e.g. `/bench/run3`.
    dir: String,
    /// The task the workers were forked from; holds the shared fd 0.
    parent: Task<V>,
    /// Whether `dir/shared` was created (`syscall`, `futimes`,
    /// `fstat-shared`, `read-shared`).
    shared: bool,
    /// `open-close`'s files `dir/f0`, `dir/f1`, ... created so far.
    own_files: usize,
    /// The parent's first fd (0 when all went well), once opened.
    fd0: Option<Fd>,
}

/// The tree imported into the mount.
#[derive(Debug)]
struct UvfsTree {
    /// What was imported (compared by pointer to know if a run's tree is it).
    source: Arc<HostTree>,
    /// The tree's directory, e.g. `/tree1`.
    dir: String,
    /// The regular files' paths relative to `dir`, in `source.files` order.
    paths: Vec<Vec<u8>>,
    /// Their sizes, same order.
    sizes: Vec<u64>,
}

impl UvfsTarget {
    /// `uvfs-hostfs`: uvfs over hostfs bound to the host directory `host` (a fresh host
    /// tmpfs, as the kernel peer's), entries and attributes trusted for 1 s between host
    /// checks (FUSE's default entry timeout), and `/bench` created in it.
    ///
    /// # Errors
    ///
    /// Mounting hostfs or `mkdir("/bench")` fails.
    pub fn hostfs(host: crate::kernel::HostDir) -> Result<UvfsTarget> {
        let opts = ::uvfs::hostfs::HostfsOptions {
            attr_timeout: std::time::Duration::from_secs(1),
            ..Default::default()
        };
        let mount = ::uvfs::hostfs::mount(host.path(), opts)
            .with_context(|| format!("hostfs::mount({})", host.path().display()))?;
        let init = Task::init(&mount);
        init.mkdirat(Fd::AT_FDCWD, "/bench", DIR_MODE)
            .with_context(|| "uvfs-hostfs: mkdir(/bench)".to_owned())?;
        Ok(UvfsTarget {
            run: None,
            tree: None,
            init,
            runs: 0,
            trees: 0,
            name: "uvfs-hostfs".to_owned(),
            _mount: mount,
            host: Some(host),
            tree_base: "",
            desc: None,
            cleanup: None,
        })
    }

    /// Mounts a fresh tmpfs with default options and creates `/bench`.
    ///
    /// # Errors
    ///
    /// `mkdir("/bench")` fails.
    pub fn new() -> Result<UvfsTarget> {
        UvfsTarget::new_variant()
    }
}

impl<V: Variant> UvfsTarget<V> {
    /// [`new`](UvfsTarget::new) with the lessons' mechanisms of `V` (`uvfs::variant`); named
    /// `uvfs` for [`Uvfs`] and `uvfs[<variant>]` otherwise, e.g. `uvfs[cas-loop-get]`.
    ///
    /// # Errors
    ///
    /// `mkdir("/bench")` fails.
    pub fn new_variant() -> Result<UvfsTarget<V>> {
        // Without limits, as measured so far: the workloads measure the file layer, and a
        // limited mount (the default) adds a shared counter to each create and new page.
        let mount = ::uvfs::tmpfs::mount(::uvfs::tmpfs::TmpfsOptions::unlimited());
        let init = Task::<V>::init_variant(&mount);
        init.mkdirat(Fd::AT_FDCWD, "/bench", DIR_MODE)
            .with_context(|| format!("{}: mkdir(/bench)", V::NAME))?;
        let name = if std::any::TypeId::of::<V>() == std::any::TypeId::of::<Uvfs>() {
            "uvfs".to_owned()
        } else {
            format!("uvfs[{}]", V::NAME)
        };
        Ok(UvfsTarget {
            run: None,
            tree: None,
            init,
            runs: 0,
            trees: 0,
            name,
            _mount: mount,
            host: None,
            tree_base: "",
            desc: None,
            cleanup: None,
        })
    }

    /// A FUSE client target: a fresh tmpfs whose `/bench` is `client` (a mount of
    /// `uvfs::fuse::client`), so that every workload, `tree` included, runs through the
    /// client; named `name`, described as `desc`; `cleanup` runs at close, after the mount
    /// went (e.g. joining an in-process server).
    ///
    /// # Errors
    ///
    /// `mkdir("/bench")` or mounting `client` on it fails.
    pub fn fuse_client(
        name: &str,
        client: Arc<Mount>,
        desc: String,
        cleanup: Option<Cleanup>,
    ) -> Result<UvfsTarget<V>> {
        let mut t = UvfsTarget::<V>::new_variant()?;
        t.init
            .mount(&client, "/bench", ::uvfs::MountFlags::empty())
            .with_context(|| format!("{name}: mount(/bench)"))?;
        t.name = name.to_owned();
        t.tree_base = "/bench";
        t.desc = Some(desc);
        t.cleanup = cleanup;
        Ok(t)
    }

    /// Copies `source` into `/treeN` and checks every file reads back as on
    /// the host.
    fn import_tree(&mut self, source: &Arc<HostTree>) -> Result<()> {
        self.trees += 1;
        let dir = format!("{}/tree{}", self.tree_base, self.trees);
        self.init
            .mkdirat(Fd::AT_FDCWD, &dir, DIR_MODE)
            .with_context(|| format!("uvfs: mkdir({dir})"))?;
        let fd = self
            .init
            .open(&dir, OpenFlags::RDONLY | OpenFlags::DIRECTORY, 0)
            .with_context(|| format!("uvfs: open({dir})"))?;
        let mut sink = UvfsSink {
            task: &self.init,
            dir: fd,
        };
        let imported = source.import(&mut sink, &format!("uvfs {dir}"));
        let closed = self
            .init
            .close(fd)
            .with_context(|| format!("uvfs: close({dir})"));
        imported?;
        closed?;
        self.tree = Some(UvfsTree {
            source: Arc::clone(source),
            dir,
            paths: source.file_paths().map(<[u8]>::to_vec).collect(),
            sizes: source.file_sizes().collect(),
        });
        Ok(())
    }
}

/// uvfs's calls for [`HostTree::import`], relative to the tree's directory.
#[derive(Debug)]
struct UvfsSink<'a, V: Variant> {
    /// The importing task (`init`).
    task: &'a Task<V>,
    /// The tree's directory, open in `task`.
    dir: Fd,
}

/// Creates the file `path` (it must not exist) as `task` and writes `data`
/// into it.
fn create_file<V: Variant>(task: &Task<V>, path: &str, data: &[u8]) -> Result<()> {
    let flags = OpenFlags::CREAT | OpenFlags::EXCL | OpenFlags::WRONLY;
    let fd = task
        .open(path, flags, FILE_MODE)
        .with_context(|| format!("uvfs: create({path})"))?;
    let mut written = 0;
    let result = loop {
        if written == data.len() {
            break Ok(());
        }
        match task.write(fd, &data[written..]) {
            Ok(0) => break Err(Error::msg(format!("uvfs: write({path}) wrote nothing"))),
            Ok(n) => written += n,
            Err(e) => break Err(Error::new(format!("uvfs: write({path})"), e)),
        }
    };
    let closed = task
        .close(fd)
        .with_context(|| format!("uvfs: close({path})"));
    result.and(closed)
}

impl<V: Variant> TreeSink for UvfsSink<'_, V> {
    type File = Fd;

    fn mkdir(&mut self, rel: &[u8], mode: u32) -> SinkResult<()> {
        Ok(self.task.mkdirat(self.dir, rel, mode)?)
    }

    fn create(&mut self, rel: &[u8], mode: u32) -> SinkResult<Fd> {
        let flags = OpenFlags::CREAT | OpenFlags::EXCL | OpenFlags::WRONLY;
        Ok(self.task.openat(self.dir, rel, flags, mode)?)
    }

    fn open(&mut self, rel: &[u8]) -> SinkResult<Fd> {
        Ok(self.task.openat(self.dir, rel, OpenFlags::RDONLY, 0)?)
    }

    fn write(&mut self, file: &Fd, data: &[u8]) -> SinkResult<usize> {
        Ok(self.task.write(*file, data)?)
    }

    fn read(&mut self, file: &Fd, buf: &mut [u8]) -> SinkResult<usize> {
        Ok(self.task.read(*file, buf)?)
    }

    fn close(&mut self, file: Fd) -> SinkResult<()> {
        Ok(self.task.close(file)?)
    }

    fn symlink(&mut self, target: &[u8], rel: &[u8]) -> SinkResult<()> {
        Ok(self.task.symlinkat(target, self.dir, rel)?)
    }
}

impl<V: Variant> Target for UvfsTarget<V> {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        if let Some(d) = &self.desc {
            return d.clone();
        }
        if let Some(host) = &self.host {
            return format!(
                "uvfs over hostfs bound to {} (entries and attributes rechecked after 1 s); \
                 tasks as for uvfs",
                host.description()
            );
        }
        if self.name != "uvfs" {
            // The variants run the same workloads the same way; say only what differs.
            return format!("as uvfs, {}", V::DESCRIPTION);
        }
        "uvfs embedded tmpfs; each thread its own Task, forked from one parent (fd 0 shared); \
         fstat-shared, read-shared: each thread a clone_thread of the parent (one fd table)"
            .to_owned()
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
        self.runs += 1;
        let dir = format!("/bench/run{}", self.runs);
        self.init
            .mkdirat(Fd::AT_FDCWD, &dir, DIR_MODE)
            .with_context(|| format!("uvfs: mkdir({dir})"))?;
        let parent = self.init.fork();
        let run = self.run.insert(UvfsRun {
            dir,
            parent,
            shared: false,
            own_files: 0,
            fd0: None,
        });
        // fd 0 of the parent, hence of every worker: the shared file, the
        // shared directory, or the tree's directory.
        let fd0 = match workload {
            Workload::Syscall | Workload::Futimes => {
                run.shared = true;
                let path = format!("{}/shared", run.dir);
                run.parent
                    .open(&path, OpenFlags::CREAT | OpenFlags::RDWR, FILE_MODE)
                    .with_context(|| format!("uvfs: open({path})"))?
            }
            Workload::FstatShared | Workload::ReadShared => {
                run.shared = true;
                let path = format!("{}/shared", run.dir);
                create_file(&self.init, &path, &shared_contents())?;
                run.parent
                    .open(&path, OpenFlags::RDONLY, 0)
                    .with_context(|| format!("uvfs: open({path})"))?
            }
            Workload::OpenClose => {
                for index in 0..threads {
                    let path = format!("{}/{}", run.dir, open_close_name(index));
                    create_file(&self.init, &path, &[])?;
                    run.own_files += 1;
                }
                // Inherited by the forked workers: they open `f<thread>`
                // relative to it.
                run.parent
                    .chdir(&run.dir)
                    .with_context(|| format!("uvfs: chdir({})", run.dir))?;
                run.parent
                    .open(&run.dir, OpenFlags::RDONLY | OpenFlags::DIRECTORY, 0)
                    .with_context(|| format!("uvfs: open({})", run.dir))?
            }
            Workload::CreatClo => run
                .parent
                .open(&run.dir, OpenFlags::RDONLY | OpenFlags::DIRECTORY, 0)
                .with_context(|| format!("uvfs: open({})", run.dir))?,
            Workload::Tree(_) => {
                let tree = self
                    .tree
                    .as_ref()
                    .ok_or_else(|| Error::msg("uvfs: tree not imported"))?;
                run.parent
                    .open(&tree.dir, OpenFlags::RDONLY | OpenFlags::DIRECTORY, 0)
                    .with_context(|| format!("uvfs: open({})", tree.dir))?
            }
        };
        run.fd0 = Some(fd0);
        if fd0.0 != 0 {
            return Err(Error::msg(format!(
                "uvfs: the parent's first open returned fd {}, not 0",
                fd0.0
            )));
        }
        let tree = self.tree.as_ref();
        let mut workers: Vec<Box<dyn Worker + '_>> = Vec::with_capacity(threads);
        for index in 0..threads {
            // Threads of the parent's process (its fd table), or processes
            // of their own (a copy of it).
            let task = if workload.kind().shares_fd_table() {
                run.parent.clone_thread()
            } else {
                run.parent.fork()
            };
            workers.push(match workload {
                Workload::Syscall => Box::new(SyscallWorker { task }),
                Workload::CreatClo => Box::new(CreatCloWorker {
                    task,
                    names: NameBuf::new(index),
                }),
                Workload::Futimes => Box::new(FutimesWorker {
                    task,
                    times: FUTIMES_TIMES.map(|(tv_sec, tv_nsec)| [Timespec { tv_sec, tv_nsec }; 2]),
                }),
                Workload::Tree(_) => {
                    let tree = tree.ok_or_else(|| Error::msg("uvfs: tree not imported"))?;
                    Box::new(TreeWorker {
                        task,
                        paths: &tree.paths,
                        sizes: &tree.sizes,
                        order: thread_order(tree.paths.len(), index),
                        pos: 0,
                        buf: ReadBuf::boxed(),
                    })
                }
                Workload::FstatShared => Box::new(FstatSharedWorker { task }),
                Workload::ReadShared => Box::new(ReadSharedWorker {
                    task,
                    k: 0,
                    buf: ReadBuf::boxed(),
                }),
                Workload::OpenClose => Box::new(OpenCloseWorker {
                    task,
                    name: open_close_name(index),
                }),
            });
        }
        Ok(workers)
    }

    fn close(self: Box<Self>) -> Result<()> {
        let UvfsTarget {
            run,
            tree,
            init,
            host,
            _mount,
            cleanup,
            ..
        } = *self;
        // Every task, file and the mount first: hostfs holds descriptors in the directory,
        // a FUSE client's server ends when its connection closes.
        drop((run, tree, init, _mount));
        let cleaned = cleanup.map_or(Ok(()), |c| (c.0)());
        let closed = match host {
            Some(h) => h.close(),
            None => Ok(()),
        };
        cleaned.and(closed)
    }

    fn teardown(&mut self) -> Result<()> {
        let Some(run) = self.run.take() else {
            return Ok(());
        };
        let UvfsRun {
            dir,
            parent,
            shared,
            own_files,
            fd0,
        } = run;
        if let Some(fd) = fd0 {
            parent
                .close(fd)
                .with_context(|| format!("uvfs: parent close({})", fd.0))?;
        }
        drop(parent);
        if shared {
            self.init
                .unlinkat(Fd::AT_FDCWD, format!("{dir}/shared"), AtFlags::empty())
                .with_context(|| format!("uvfs: unlink({dir}/shared)"))?;
        }
        for index in 0..own_files {
            let path = format!("{dir}/{}", open_close_name(index));
            self.init
                .unlinkat(Fd::AT_FDCWD, &path, AtFlags::empty())
                .with_context(|| format!("uvfs: unlink({path})"))?;
        }
        // ENOTEMPTY here means a workload left files behind (creat-clo must
        // unlink every file it creates).
        self.init
            .unlinkat(Fd::AT_FDCWD, &dir, AtFlags::REMOVEDIR)
            .with_context(|| format!("uvfs: rmdir({dir}) after the run"))
    }
}

/// `syscall` on uvfs: `close(dup(0)); getpid(); getuid(); umask(022)`.
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
struct SyscallWorker<V: Variant> {
    /// This worker's task; its fd 0 is the shared file.
    task: Task<V>,
}

impl<V: Variant> Worker for SyscallWorker<V> {
    fn run(&mut self, n: u32) -> Result<()> {
        let task = &self.task;
        for _ in 0..n {
            let fd = task.dup(Fd(0)).with_context(|| "uvfs syscall: dup(0)")?;
            task.close(fd)
                .with_context(|| format!("uvfs syscall: close({})", fd.0))?;
            black_box(task.getpid());
            black_box(task.getuid());
            black_box(task.umask(0o022));
        }
        Ok(())
    }
}

/// `creat-clo` on uvfs: create, close, unlink a fresh name in the shared
/// directory (fd 0).
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
struct CreatCloWorker<V: Variant> {
    /// This worker's task; its fd 0 is the run's directory.
    task: Task<V>,
    /// This thread's file names.
    names: NameBuf,
}

impl<V: Variant> Worker for CreatCloWorker<V> {
    fn run(&mut self, n: u32) -> Result<()> {
        let task = &self.task;
        for _ in 0..n {
            self.names.advance();
            let name = self.names.name();
            let fd = task
                .openat(
                    Fd(0),
                    name,
                    OpenFlags::CREAT | OpenFlags::WRONLY | OpenFlags::TRUNC,
                    FILE_MODE,
                )
                .with_context(|| {
                    format!("uvfs creat-clo: open({})", String::from_utf8_lossy(name))
                })?;
            task.close(fd).with_context(|| {
                format!("uvfs creat-clo: close({})", String::from_utf8_lossy(name))
            })?;
            task.unlinkat(Fd(0), name, AtFlags::empty())
                .with_context(|| {
                    format!("uvfs creat-clo: unlink({})", String::from_utf8_lossy(name))
                })?;
        }
        Ok(())
    }
}

/// `futimes` on uvfs: two `futimens` on the shared fd 0 per loop.
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
struct FutimesWorker<V: Variant> {
    /// This worker's task; its fd 0 is the shared file.
    task: Task<V>,
    /// The two (atime, mtime) pairs set alternately.
    times: [[Timespec; 2]; 2],
}

impl<V: Variant> Worker for FutimesWorker<V> {
    fn run(&mut self, n: u32) -> Result<()> {
        let task = &self.task;
        for _ in 0..n {
            task.futimens(Fd(0), Some(&self.times[0]))
                .with_context(|| "uvfs futimes: futimens(t1)")?;
            task.futimens(Fd(0), Some(&self.times[1]))
                .with_context(|| "uvfs futimes: futimens(t2)")?;
        }
        Ok(())
    }
}

/// `tree` on uvfs: fstatat, open, read all, close, file after file in this
/// thread's order, relative to the tree's directory (fd 0).
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
struct TreeWorker<'a, V: Variant> {
    /// This worker's task; its fd 0 is the tree's directory.
    task: Task<V>,
    /// Regular files, relative to the tree's directory.
    paths: &'a [Vec<u8>],
    /// Their sizes on the host.
    sizes: &'a [u64],
    /// This thread's order over `paths`.
    order: Vec<u32>,
    /// Next index into `order`.
    pos: usize,
    /// The read buffer.
    buf: Box<ReadBuf>,
}

impl<V: Variant> Worker for TreeWorker<'_, V> {
    fn run(&mut self, n: u32) -> Result<()> {
        let task = &self.task;
        for _ in 0..n {
            let i = self.order[self.pos] as usize;
            self.pos = (self.pos + 1) % self.order.len();
            let path = self.paths[i].as_slice();
            let show = || String::from_utf8_lossy(path).into_owned();
            let st = task
                .fstatat(Fd(0), path, AtFlags::empty())
                .with_context(|| format!("uvfs tree: fstatat({})", show()))?;
            if st.st_mode & S_IFMT != S_IFREG {
                return Err(Error::msg(format!(
                    "uvfs tree: {} is not a regular file (mode {:o})",
                    show(),
                    st.st_mode
                )));
            }
            let fd = task
                .openat(Fd(0), path, OpenFlags::RDONLY, 0)
                .with_context(|| format!("uvfs tree: open({})", show()))?;
            let mut total = 0u64;
            loop {
                let got = task
                    .read(fd, &mut self.buf.0)
                    .with_context(|| format!("uvfs tree: read({})", show()))?;
                if got == 0 {
                    break;
                }
                total += got as u64;
            }
            task.close(fd)
                .with_context(|| format!("uvfs tree: close({})", show()))?;
            if total != self.sizes[i] || total as i64 != st.st_size {
                return Err(Error::msg(format!(
                    "uvfs tree: {}: read {total} bytes, st_size {}, host size {}",
                    show(),
                    st.st_size,
                    self.sizes[i]
                )));
            }
        }
        Ok(())
    }
}

/// `fstat-shared` on uvfs: `fstat(0)` on the shared file, from a thread of
/// the parent's process (one fd table, so each call takes a reference).
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
struct FstatSharedWorker<V: Variant> {
    /// A `clone_thread` of the run's parent; fd 0 is the shared file.
    task: Task<V>,
}

impl<V: Variant> Worker for FstatSharedWorker<V> {
    fn run(&mut self, n: u32) -> Result<()> {
        let task = &self.task;
        for _ in 0..n {
            let st = task
                .fstat(Fd(0))
                .with_context(|| "uvfs fstat-shared: fstat(0)")?;
            if st.st_mode & S_IFMT != S_IFREG || st.st_size != SHARED_FILE_SIZE as i64 {
                return Err(Error::msg(format!(
                    "uvfs fstat-shared: fstat(0): mode {:o}, size {}, expected a regular file of \
                     {SHARED_FILE_SIZE} bytes",
                    st.st_mode, st.st_size
                )));
            }
        }
        Ok(())
    }
}

/// `read-shared` on uvfs: `pread(0, buf, 4096, off)` on the shared file,
/// page after page, from a thread of the parent's process.
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
struct ReadSharedWorker<V: Variant> {
    /// A `clone_thread` of the run's parent; fd 0 is the shared file.
    task: Task<V>,
    /// This thread's reads so far (the next one's `k`).
    k: u64,
    /// The read buffer (only its first [`READ_SHARED_LEN`] bytes are used).
    buf: Box<ReadBuf>,
}

impl<V: Variant> Worker for ReadSharedWorker<V> {
    fn run(&mut self, n: u32) -> Result<()> {
        let task = &self.task;
        for _ in 0..n {
            let off = read_shared_offset(self.k);
            self.k += 1;
            let buf = &mut self.buf.0[..READ_SHARED_LEN];
            let got = task
                .pread(Fd(0), buf, off as i64)
                .with_context(|| format!("uvfs read-shared: pread(0, {off})"))?;
            if got != READ_SHARED_LEN || buf[0] != shared_byte(off) {
                return Err(Error::msg(format!(
                    "uvfs read-shared: pread(0, {off}): {got} bytes, first {}, expected \
                     {READ_SHARED_LEN} bytes, first {}",
                    buf[0],
                    shared_byte(off)
                )));
            }
        }
        Ok(())
    }
}

/// `open-close` on uvfs: `close(openat(AT_FDCWD, "f<thread>", O_RDONLY))`
/// in this worker's own process, whose cwd is the run's directory.
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
struct OpenCloseWorker<V: Variant> {
    /// This worker's task (forked); its cwd is the run's directory.
    task: Task<V>,
    /// This thread's own file, relative to the cwd: `f<thread>`.
    name: String,
}

impl<V: Variant> Worker for OpenCloseWorker<V> {
    fn run(&mut self, n: u32) -> Result<()> {
        let task = &self.task;
        for _ in 0..n {
            let fd = task
                .openat(Fd::AT_FDCWD, &self.name, OpenFlags::RDONLY, 0)
                .with_context(|| format!("uvfs open-close: open({})", self.name))?;
            task.close(fd)
                .with_context(|| format!("uvfs open-close: close({})", self.name))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::run_one;
    use std::time::Duration;

    /// Every workload runs on uvfs with 1 and 2 threads, its teardown
    /// checks pass, and nothing is left under `/bench`.
    #[test]
    fn runs_every_workload_and_cleans_up() {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir(src.path().join("sub")).unwrap();
        std::fs::write(src.path().join("sub/a.h"), vec![7u8; 100_000]).unwrap();
        std::fs::write(src.path().join("b.h"), b"int b;").unwrap();
        let tree = Arc::new(HostTree::read(src.path()).unwrap());

        let mut target = UvfsTarget::new().unwrap();
        for workload in [
            Workload::Syscall,
            Workload::CreatClo,
            Workload::Futimes,
            Workload::Tree(tree),
            Workload::FstatShared,
            Workload::ReadShared,
            Workload::OpenClose,
        ] {
            for threads in [1, 2] {
                let rate =
                    run_one(&mut target, &workload, threads, Duration::from_millis(20)).unwrap();
                assert!(rate > 0.0, "{workload:?} {threads}");
            }
        }
        // rmdir succeeds only if every run's directory was removed.
        target
            .init
            .unlinkat(Fd::AT_FDCWD, "/bench", AtFlags::REMOVEDIR)
            .unwrap();
    }

    /// Leftover files fail the teardown (the open-close files are unlinked
    /// by teardown itself; anything else is a leftover).
    #[test]
    fn teardown_fails_on_leftovers() {
        let mut target = UvfsTarget::new().unwrap();
        drop(target.setup(&Workload::OpenClose, 2).unwrap());
        create_file(&target.init, "/bench/run1/stray", b"").unwrap();
        let e = target.teardown().unwrap_err().to_string();
        assert!(e.contains("rmdir"), "{e}");
    }
}
