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

use std::sync::Arc;

use ::uvfs::variant::{Uvfs, Variant};
use ::uvfs::{AtFlags, Errno, Fd, Mount, OpenFlags, Task, Timespec};

use crate::calls::{Calls, Open, Stat};
use crate::error::{Context, Error, Result};
use crate::loops;
use crate::target::{Target, Worker};
use crate::workloads::{open_close_name, shared_contents, STAT_PATH, STAT_PATH_DIRS};
use crate::workloads::{HostTree, SinkResult, TreeSink, Workload, DIR_MODE, FILE_MODE};

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
    /// `stat-path`'s directories ([`STAT_PATH_DIRS`]) and then its file created so far
    /// (0 to 4).
    stat_path: usize,
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

    /// [`new`](UvfsTarget::new) on a tmpfs with tmpfs's default `size=` and `nr_inodes=`
    /// limits (half of RAM, `TmpfsOptions::default()`), as a plain Linux tmpfs mount has:
    /// every create, unlink and new page is charged to the mount's counters. Named
    /// `uvfs-limited`.
    ///
    /// # Errors
    ///
    /// `mkdir("/bench")` fails.
    pub fn new_limited() -> Result<UvfsTarget> {
        let mut t = UvfsTarget::on_tmpfs(::uvfs::tmpfs::TmpfsOptions::default())?;
        t.name = "uvfs-limited".to_owned();
        Ok(t)
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
        // Without limits, as measured so far: the workloads measure the file layer; the
        // audit's `-limited` pairs measure a limited mount (`new_limited`).
        UvfsTarget::on_tmpfs(::uvfs::tmpfs::TmpfsOptions::unlimited())
    }

    /// [`new_variant`](UvfsTarget::new_variant) on a tmpfs mounted with `opts`.
    ///
    /// # Errors
    ///
    /// `mkdir("/bench")` fails.
    fn on_tmpfs(opts: ::uvfs::tmpfs::TmpfsOptions) -> Result<UvfsTarget<V>> {
        let mount = ::uvfs::tmpfs::mount(opts);
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
            stat_path: 0,
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
            Workload::StatPath => {
                for d in STAT_PATH_DIRS {
                    let path = format!("{}/{d}", run.dir);
                    self.init
                        .mkdirat(Fd::AT_FDCWD, &path, DIR_MODE)
                        .with_context(|| format!("uvfs: mkdir({path})"))?;
                    run.stat_path += 1;
                }
                create_file(&self.init, &format!("{}/{STAT_PATH}", run.dir), &[])?;
                run.stat_path += 1;
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
        let who = self.name.as_str();
        let mut workers: Vec<Box<dyn Worker + '_>> = Vec::with_capacity(threads);
        for index in 0..threads {
            // Threads of the parent's process (its fd table), or processes
            // of their own (a copy of it).
            let calls = UvfsCalls::new(if workload.kind().shares_fd_table() {
                run.parent.clone_thread()
            } else {
                run.parent.fork()
            });
            // fd 0 of every worker: the shared file or directory (see above).
            let fd0 = Fd(0);
            workers.push(match workload {
                Workload::Syscall => Box::new(loops::Syscall::new(who, calls, fd0)),
                Workload::CreatClo => Box::new(loops::CreatClo::new(who, calls, fd0, index)),
                Workload::Futimes => Box::new(loops::Futimes::new(who, calls, fd0)),
                Workload::Tree(_) => {
                    let tree = tree.ok_or_else(|| Error::msg("uvfs: tree not imported"))?;
                    Box::new(loops::Tree::new(
                        who,
                        calls,
                        fd0,
                        &tree.paths,
                        &tree.sizes,
                        index,
                    ))
                }
                Workload::FstatShared => Box::new(loops::FstatShared::new(who, calls, fd0)),
                Workload::ReadShared => Box::new(loops::ReadShared::new(who, calls, fd0)),
                Workload::OpenClose => Box::new(loops::OpenClose::new(
                    who,
                    calls,
                    open_close_name(index).into_bytes(),
                )),
                Workload::StatPath => {
                    Box::new(loops::StatPath::new(who, calls, fd0, STAT_PATH.as_bytes()))
                }
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
            stat_path,
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
        if stat_path > STAT_PATH_DIRS.len() {
            let path = format!("{dir}/{STAT_PATH}");
            self.init
                .unlinkat(Fd::AT_FDCWD, &path, AtFlags::empty())
                .with_context(|| format!("uvfs: unlink({path})"))?;
        }
        for d in STAT_PATH_DIRS[..stat_path.min(STAT_PATH_DIRS.len())]
            .iter()
            .rev()
        {
            let path = format!("{dir}/{d}");
            self.init
                .unlinkat(Fd::AT_FDCWD, &path, AtFlags::REMOVEDIR)
                .with_context(|| format!("uvfs: rmdir({path})"))?;
        }
        // ENOTEMPTY here means a workload left files behind (creat-clo must
        // unlink every file it creates).
        self.init
            .unlinkat(Fd::AT_FDCWD, &dir, AtFlags::REMOVEDIR)
            .with_context(|| format!("uvfs: rmdir({dir}) after the run"))
    }
}

/// uvfs's [`Calls`]: one worker thread's `Task`, each call the `Task` method of the same
/// name (a `Task` is `Send`, not `Sync`: the thread owns it).
#[derive(Debug)]
pub struct UvfsCalls<V: Variant = Uvfs> {
    /// This worker's task: forked from the run's parent (its own copy of the descriptor
    /// table) or, for the workloads that share one, a `clone_thread` of it.
    task: Task<V>,
}

impl<V: Variant> UvfsCalls<V> {
    /// The calls of `task`.
    pub fn new(task: Task<V>) -> Self {
        UvfsCalls { task }
    }
}

/// uvfs's `Stat` as the workloads check it.
#[inline]
fn stat(st: ::uvfs::Stat) -> Stat {
    Stat {
        mode: st.st_mode,
        size: st.st_size,
    }
}

impl<V: Variant> Calls for UvfsCalls<V> {
    type Fd = Fd;
    type At = Fd;
    type Path = [u8];
    type Times = [Timespec; 2];
    type Error = ::uvfs::Errno;

    fn times((tv_sec, tv_nsec): (i64, i64)) -> [Timespec; 2] {
        [Timespec { tv_sec, tv_nsec }; 2]
    }

    #[inline]
    fn dup(&self, fd: Fd) -> std::result::Result<Fd, Errno> {
        self.task.dup(fd)
    }

    #[inline]
    fn close(&self, fd: Fd) -> std::result::Result<(), Errno> {
        self.task.close(fd)
    }

    #[inline]
    fn getpid(&self) -> std::result::Result<u32, Errno> {
        // A pid is positive: the cast keeps its value.
        Ok(self.task.getpid() as u32)
    }

    #[inline]
    fn getuid(&self) -> std::result::Result<u32, Errno> {
        Ok(self.task.getuid())
    }

    #[inline]
    fn umask(&self, mask: u32) -> std::result::Result<u32, Errno> {
        Ok(self.task.umask(mask))
    }

    #[inline]
    fn openat(&self, dir: Option<Fd>, path: &[u8], how: Open) -> std::result::Result<Fd, Errno> {
        let dir = dir.unwrap_or(Fd::AT_FDCWD);
        match how {
            Open::Read => self.task.openat(dir, path, OpenFlags::RDONLY, 0),
            Open::CreateTrunc => self.task.openat(
                dir,
                path,
                OpenFlags::CREAT | OpenFlags::WRONLY | OpenFlags::TRUNC,
                FILE_MODE,
            ),
        }
    }

    #[inline]
    fn unlinkat(&self, dir: Fd, path: &[u8]) -> std::result::Result<(), Errno> {
        self.task.unlinkat(dir, path, AtFlags::empty())
    }

    #[inline]
    fn fstat(&self, fd: Fd) -> std::result::Result<Stat, Errno> {
        self.task.fstat(fd).map(stat)
    }

    #[inline]
    fn fstatat(&self, dir: Option<Fd>, path: &[u8]) -> std::result::Result<Stat, Errno> {
        self.task
            .fstatat(dir.unwrap_or(Fd::AT_FDCWD), path, AtFlags::empty())
            .map(stat)
    }

    #[inline]
    fn read(&self, fd: &mut Fd, buf: &mut [u8]) -> std::result::Result<usize, Errno> {
        self.task.read(*fd, buf)
    }

    #[inline]
    fn pread(&self, fd: Fd, buf: &mut [u8], off: u64) -> std::result::Result<usize, Errno> {
        // An offset above i64::MAX becomes negative, which `pread` refuses with EINVAL, as
        // Linux refuses it (the workloads' offsets are below 64 KiB).
        self.task.pread(fd, buf, off as i64)
    }

    #[inline]
    fn futimens(&self, fd: Fd, times: &[Timespec; 2]) -> std::result::Result<(), Errno> {
        self.task.futimens(fd, Some(times))
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
            Workload::StatPath,
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
