//! wasmer's in-memory file system (`virtual-fs`, `mem_fs::FileSystem`) as a
//! [`Target`] (`wasmer-memfs`): the workloads through its `FileSystem` trait
//! and its handles (`Box<dyn VirtualFile + Send + Sync>`), with absolute
//! paths.
//!
//! What `mem_fs` is (virtual-fs 0.704, src/mem_fs/): one
//! `Arc<RwLock<FileSystemInner>>` over a slab of inodes; a directory lists
//! its children's inodes in a `Vec`, searched linearly by name at each path
//! step. Every call takes that one lock: `metadata` for read; opening an
//! existing file for write (it sets the access time); `remove_file` for read
//! (find the entry) then for write (unlink); a handle's `size()` for read;
//! its reads, seeks and `set_times` for write.
//!
//! Driving the async handles: reads, writes and seeks are tokio
//! `AsyncRead`/`AsyncWrite`/`AsyncSeek` (opening, stat and removal are
//! synchronous). Setup and the tree import run them on a tokio current-thread
//! runtime, as `virtual-fs`'s own tests do (`#[tokio::test]`). The workers,
//! which make one call at a time through the shared loops ([`WasmerCalls`]),
//! poll each future once with a no-op waker: `mem_fs`'s futures never return
//! `Pending` (one that did would fail its call, not be waited for), so no
//! runtime is entered per call or per batch.
//!
//! One operation of each supported workload:
//!
//! - `creat-clo`: `open("/bench/runN/t<thread>-<k>", write + create +
//!   truncate)`, drop the handle, `remove_file` under a `Mutex` of ours
//!   (see "A race in `remove_file`" below).
//! - `open-close`: `open("/bench/runN/f<thread>", read)`, drop the handle.
//! - `tree`: `metadata(path)` (checked a file of the host's size), open for
//!   read, `read().await` to the end with a 64 KiB buffer, drop.
//! - `fstat-shared`: `size()` on ONE handle of `/bench/runN/shared` that
//!   every thread shares (`VirtualFile` is `Sync` and `size` takes `&self`),
//!   checked 64 KiB. That is `mem_fs`'s only stat on a handle: the size (a
//!   read lock and an inode lookup), no file type, no other field.
//! - `read-shared`: `seek(Start(off)).await` and one 4 KiB `read().await`
//!   on this thread's own handle of the shared file, opened in setup: reads
//!   and seeks take `&mut self` and there is no positional read, so one
//!   handle cannot be shared without a lock of ours. Both take the fs-wide
//!   write lock.
//! - `futimes`: `set_times(t1, t1)` then `set_times(t2, t2)` (atime, mtime
//!   in ns) on this thread's own handle of the shared file (`&mut self`,
//!   as for reads); teardown checks the file's mtime is t1 or t2.
//!
//! Unsupported: `syscall` (a `VirtualFile` cannot be duplicated through the
//! trait; no pid, uid or umask).
//!
//! A race in `remove_file` (virtual-fs 0.704.2, src/mem_fs/filesystem.rs
//! `remove_file` and `remove_child_from_node`): it finds the entry's
//! position in its directory's child list under the read lock, drops it,
//! then removes by that position under the write lock. Two threads removing
//! in one directory (`creat-clo` with 2 threads) shift each other's
//! positions: the wrong entry is unlinked, or `Vec::remove` panics with the
//! write lock held ("removal index (is 1) should be < len (is 1)"), which
//! poisons the lock and fails every later call ("lock error"). So
//! `creat-clo` serializes its `remove_file` calls with a `Mutex` of ours;
//! `mem_fs`'s write lock serializes the unlink anyway, so this adds only the
//! read-locked search (a scan of the few entries there) to the serialized
//! part, and one more lock per file.
//!
//! Lock order: `WasmerTarget::remove_lock`, then `mem_fs`'s lock (taken
//! and released inside each call).

use std::cell::RefCell;
use std::ffi::OsStr;
use std::io::SeekFrom;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::runtime::Runtime;
use virtual_fs::mem_fs::FileSystem as MemFs;
use virtual_fs::{AsyncReadExt as _, AsyncSeekExt as _, AsyncWriteExt as _};
use virtual_fs::{FileSystem as _, VirtualFile};

use super::{leftovers, unsupported, PeerError};
use crate::calls::{Calls, Open, Stat, Unsupported};
use crate::error::{Context, Error, Result};
use crate::loops;
use crate::target::{Target, Worker};
use crate::workloads::{
    open_close_name, shared_contents, HostTree, SinkResult, TreeSink, Workload, WorkloadKind,
    DIR_MODE, FILE_MODE, FUTIMES_TIMES, S_IFREG,
};

/// `S_IFDIR`: a directory's file-type bits of `st_mode`.
const S_IFDIR: u32 = 0o040_000;

/// The target's name in tables, JSON and `--target`.
const NAME: &str = "wasmer-memfs";

/// An open file of `mem_fs`.
type Handle = Box<dyn VirtualFile + Send + Sync + 'static>;

/// wasmer's `mem_fs::FileSystem`, as a [`Target`].
#[derive(Debug)]
pub struct WasmerTarget {
    /// The file system: `/bench`, the runs under it, the imported tree.
    fs: MemFs,
    /// The main thread's runtime, for the writes and reads of setup and of
    /// the tree import.
    rt: Runtime,
    /// Held around every `creat-clo` `remove_file`: see the module doc's
    /// "A race in `remove_file`". Outside `mem_fs`'s lock.
    remove_lock: Mutex<()>,
    /// The current run; `None` between runs.
    run: Option<WasmerRun>,
    /// The imported tree, once a `tree` run has needed it.
    tree: Option<WasmerTree>,
    /// Runs set up so far, to name each run's directory.
    runs: u64,
    /// Trees imported so far, to name each tree's directory.
    trees: u64,
}

/// One run's state, for the workers and teardown.
#[derive(Debug)]
struct WasmerRun {
    /// The run's directory, e.g. `/bench/run3`.
    dir: String,
    /// Whether `dir/shared` was created (`fstat-shared`, `read-shared`,
    /// `futimes`).
    shared: bool,
    /// Whether the run is `futimes` (teardown checks the times it set).
    futimes: bool,
    /// `open-close`'s files `dir/f0`, `dir/f1`, ... created so far.
    own_files: usize,
    /// `fstat-shared`'s one handle of `dir/shared`, shared by all workers.
    handle: Option<Handle>,
}

/// The tree imported into the file system.
#[derive(Debug)]
struct WasmerTree {
    /// What was imported (compared by pointer to know if a run's tree is it).
    source: Arc<HostTree>,
    /// The regular files' absolute paths, e.g. `/tree1/stdio.h`, in
    /// `source.files` order.
    paths: Vec<PathBuf>,
    /// Their sizes, same order.
    sizes: Vec<u64>,
}

/// A current-thread tokio runtime with no I/O or time driver: all `mem_fs`
/// needs to poll its futures.
fn runtime() -> Result<Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .with_context(|| format!("{NAME}: building a tokio current-thread runtime"))
}

/// `time` (seconds, nanoseconds) in nanoseconds since the epoch, as
/// `set_times` takes it.
fn nanos((sec, nsec): (i64, i64)) -> u64 {
    (sec as u64) * 1_000_000_000 + nsec as u64
}

impl WasmerTarget {
    /// A fresh `mem_fs` with `/bench`.
    ///
    /// # Errors
    ///
    /// The runtime cannot be built or `create_dir("/bench")` fails.
    pub fn new() -> Result<WasmerTarget> {
        let fs = MemFs::default();
        fs.create_dir(Path::new("/bench"))
            .with_context(|| format!("{NAME}: create_dir(/bench)"))?;
        Ok(WasmerTarget {
            fs,
            rt: runtime()?,
            remove_lock: Mutex::new(()),
            run: None,
            tree: None,
            runs: 0,
            trees: 0,
        })
    }

    /// Copies `source` into `/treeN` and checks every file reads back as on
    /// the host.
    fn import_tree(&mut self, source: &Arc<HostTree>) -> Result<()> {
        self.trees += 1;
        let dir = format!("/tree{}", self.trees);
        self.fs
            .create_dir(Path::new(&dir))
            .with_context(|| format!("{NAME}: create_dir({dir})"))?;
        let mut sink = WasmerSink {
            fs: &self.fs,
            rt: &self.rt,
            dir: Path::new(&dir),
        };
        source.import(&mut sink, &format!("{NAME} {dir}"))?;
        self.tree = Some(WasmerTree {
            source: Arc::clone(source),
            paths: source.file_paths().map(|rel| sink.path(rel)).collect(),
            sizes: source.file_sizes().collect(),
        });
        Ok(())
    }

    /// Creates `path` (it must not exist) holding `data`.
    fn create_file(&self, path: &str, data: &[u8]) -> Result<()> {
        let mut f = self
            .fs
            .new_open_options()
            .write(true)
            .create_new(true)
            .open(path)
            .with_context(|| format!("{NAME}: create({path})"))?;
        self.rt
            .block_on(async {
                f.write_all(data).await?;
                f.flush().await
            })
            .with_context(|| format!("{NAME}: write({path})"))
    }
}

/// `mem_fs`'s calls for [`HostTree::import`], below the tree's directory.
#[derive(Debug)]
struct WasmerSink<'a> {
    /// The file system.
    fs: &'a MemFs,
    /// The runtime the reads and writes run on.
    rt: &'a Runtime,
    /// The tree's directory, e.g. `/tree1`.
    dir: &'a Path,
}

impl WasmerSink<'_> {
    /// The absolute path of `rel`.
    fn path(&self, rel: &[u8]) -> PathBuf {
        self.dir.join(OsStr::from_bytes(rel))
    }
}

impl TreeSink for WasmerSink<'_> {
    type File = RefCell<Handle>;

    fn mkdir(&mut self, rel: &[u8], _mode: u32) -> SinkResult<()> {
        Ok(self.fs.create_dir(&self.path(rel))?)
    }

    fn create(&mut self, rel: &[u8], _mode: u32) -> SinkResult<Self::File> {
        let f = self
            .fs
            .new_open_options()
            .write(true)
            .create_new(true)
            .open(self.path(rel))?;
        Ok(RefCell::new(f))
    }

    fn open(&mut self, rel: &[u8]) -> SinkResult<Self::File> {
        let f = self.fs.new_open_options().read(true).open(self.path(rel))?;
        Ok(RefCell::new(f))
    }

    fn write(&mut self, file: &Self::File, data: &[u8]) -> SinkResult<usize> {
        let mut f = file.borrow_mut();
        Ok(self.rt.block_on(f.write(data))?)
    }

    fn read(&mut self, file: &Self::File, buf: &mut [u8]) -> SinkResult<usize> {
        let mut f = file.borrow_mut();
        Ok(self.rt.block_on(f.read(buf))?)
    }

    fn close(&mut self, file: Self::File) -> SinkResult<()> {
        let mut f = file.into_inner();
        Ok(self.rt.block_on(f.flush())?)
    }

    fn symlink(&mut self, target: &[u8], rel: &[u8]) -> SinkResult<()> {
        // mem_fs names the link's contents `source` and its path `target`.
        Ok(self
            .fs
            .create_symlink(Path::new(OsStr::from_bytes(target)), &self.path(rel))?)
    }
}

impl Target for WasmerTarget {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> String {
        "wasmer virtual-fs 0.704 mem_fs (one RwLock over an inode slab), FileSystem calls with \
         absolute paths, each thread its own; close = drop; creat-clo: remove_file under a mutex of \
         ours (mem_fs's unlink races); async reads/seeks on a per-thread \
         tokio current-thread runtime, one block_on per batch; fstat-shared: size() on one \
         shared handle (its only handle stat); read-shared, futimes: each thread its own handle \
         of the shared file (seek + 4 KiB read; set_times x2); no syscall (no dup)"
            .to_owned()
    }

    fn supports(&self, kind: WorkloadKind) -> bool {
        // stat-path: not wired up here (no setup of its directories) yet.
        !matches!(kind, WorkloadKind::Syscall | WorkloadKind::StatPath)
    }

    fn setup(&mut self, workload: &Workload, threads: usize) -> Result<Vec<Box<dyn Worker + '_>>> {
        if !self.supports(workload.kind()) {
            return Err(unsupported(NAME, workload.kind()));
        }
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
        self.fs
            .create_dir(Path::new(&dir))
            .with_context(|| format!("{NAME}: create_dir({dir})"))?;
        self.run = Some(WasmerRun {
            dir: dir.clone(),
            shared: false,
            futimes: matches!(workload, Workload::Futimes),
            own_files: 0,
            handle: None,
        });
        let shared = format!("{dir}/shared");
        match workload {
            Workload::FstatShared | Workload::ReadShared | Workload::Futimes => {
                self.create_file(&shared, &shared_contents())?;
                if let Some(run) = self.run.as_mut() {
                    run.shared = true;
                }
            }
            Workload::OpenClose => {
                for index in 0..threads {
                    let path = format!("{dir}/{}", open_close_name(index));
                    self.create_file(&path, &[])?;
                    if let Some(run) = self.run.as_mut() {
                        run.own_files += 1;
                    }
                }
            }
            _ => {}
        }
        if let (Workload::FstatShared, Some(run)) = (workload, self.run.as_mut()) {
            let f = self
                .fs
                .new_open_options()
                .read(true)
                .open(&shared)
                .with_context(|| format!("{NAME}: open({shared})"))?;
            run.handle = Some(f);
        }
        let fs = &self.fs;
        let remove_lock = &self.remove_lock;
        let tree = self.tree.as_ref();
        let handle = self.run.as_ref().and_then(|r| r.handle.as_deref());
        // This worker's own handle of the shared file.
        let open_shared = || {
            fs.new_open_options()
                .read(true)
                .open(&shared)
                .with_context(|| format!("{NAME}: open({shared})"))
        };
        let run_dir = self
            .run
            .as_ref()
            .map(|r| Path::new(r.dir.as_str()))
            .ok_or_else(|| Error::msg(format!("{NAME}: no run")))?;
        let calls = |own: Option<Handle>| WasmerCalls::new(fs, remove_lock, handle, own);
        let mut workers: Vec<Box<dyn Worker + '_>> = Vec::with_capacity(threads);
        for index in 0..threads {
            workers.push(match workload {
                Workload::CreatClo => {
                    Box::new(loops::CreatClo::new(NAME, calls(None), run_dir, index))
                }
                Workload::OpenClose => Box::new(loops::OpenClose::new(
                    NAME,
                    calls(None),
                    PathBuf::from(format!("{dir}/{}", open_close_name(index))),
                )),
                Workload::Tree(_) => {
                    let tree = tree.ok_or_else(|| Error::msg(format!("{NAME}: no tree")))?;
                    // The paths are absolute: no directory to join them to.
                    Box::new(loops::Tree::new(
                        NAME,
                        calls(None),
                        Path::new(""),
                        &tree.paths,
                        &tree.sizes,
                        index,
                    ))
                }
                Workload::FstatShared => {
                    if handle.is_none() {
                        return Err(Error::msg(format!("{NAME}: no shared handle")));
                    }
                    Box::new(loops::FstatShared::new(NAME, calls(None), run_dir))
                }
                Workload::ReadShared => Box::new(loops::ReadShared::new(
                    NAME,
                    calls(Some(open_shared()?)),
                    run_dir,
                )),
                Workload::Futimes => Box::new(loops::Futimes::new(
                    NAME,
                    calls(Some(open_shared()?)),
                    run_dir,
                )),
                Workload::Syscall | Workload::StatPath => {
                    return Err(unsupported(NAME, workload.kind()))
                }
            });
        }
        Ok(workers)
    }

    fn teardown(&mut self) -> Result<()> {
        let Some(run) = self.run.take() else {
            return Ok(());
        };
        let WasmerRun {
            dir,
            shared,
            futimes,
            own_files,
            handle,
        } = run;
        drop(handle);
        let mut made: Vec<String> = (0..own_files).map(open_close_name).collect();
        if shared {
            made.push("shared".to_owned());
        }
        if futimes && shared {
            let path = format!("{dir}/shared");
            let meta = self
                .fs
                .metadata(Path::new(&path))
                .with_context(|| format!("{NAME}: metadata({path})"))?;
            let times = FUTIMES_TIMES.map(nanos);
            if !times.contains(&meta.modified) || !times.contains(&meta.accessed) {
                return Err(Error::msg(format!(
                    "{NAME}: {path}: atime {} mtime {} after futimes, expected {} or {}",
                    meta.accessed, meta.modified, times[0], times[1]
                )));
            }
        }
        for name in &made {
            let path = format!("{dir}/{name}");
            self.fs
                .remove_file(Path::new(&path))
                .with_context(|| format!("{NAME}: remove_file({path})"))?;
        }
        // Anything left is a workload's leftover (creat-clo must remove every
        // file it creates).
        let mut left = Vec::new();
        for entry in self
            .fs
            .read_dir(Path::new(&dir))
            .with_context(|| format!("{NAME}: read_dir({dir}) after the run"))?
        {
            let entry = entry.with_context(|| format!("{NAME}: read_dir({dir}) after the run"))?;
            left.push(entry.file_name().to_string_lossy().into_owned());
        }
        if !left.is_empty() {
            left.sort_unstable();
            return Err(Error::msg(format!(
                "{NAME}: {dir} holds {} after the run: {}",
                left.len(),
                leftovers(&left)
            )));
        }
        self.fs
            .remove_dir(Path::new(&dir))
            .with_context(|| format!("{NAME}: remove_dir({dir}) after the run"))
    }
}

/// `mem_fs`'s [`Calls`]: its `FileSystem` trait and its handles, with absolute paths.
///
/// How it spells each call: a directory ([`Calls::At`]) is its absolute path, `""` for
/// "paths are absolute already" (the tree's and open-close's, built once in setup); a name
/// below a directory is joined into a buffer of this thread's, reused. `openat` opens with
/// read, or with write + create + truncate; `close` drops the handle; `unlinkat` is
/// `remove_file` under the target's `remove_lock` (see the module doc's race); `fstatat` is
/// `metadata`; `read` the handle's `AsyncRead`. On the shared file: `fstat` is `size()` of
/// the one handle all threads share (the handle was opened on a regular file, which is the
/// type reported; the size is `mem_fs`'s); `pread` a seek and a read, and `futimens`
/// `set_times`, on this thread's own handle (both take `&mut self`). No `dup`, `getpid`,
/// `getuid` or `umask`: those answer [`Unsupported`].
pub struct WasmerCalls<'a> {
    /// The file system.
    fs: &'a MemFs,
    /// The target's `remove_lock`, held around `remove_file`.
    remove_lock: &'a Mutex<()>,
    /// A directory's path and a name joined, for the `*at` calls.
    path: RefCell<Vec<u8>>,
    /// `fstat-shared`: the one handle of the shared file all threads share.
    shared: Option<&'a (dyn VirtualFile + Send + Sync)>,
    /// `read-shared`, `futimes`: this thread's own handle of the shared file.
    own: RefCell<Option<Handle>>,
}

impl std::fmt::Debug for WasmerCalls<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmerCalls").finish_non_exhaustive()
    }
}

/// A `mem_fs` call's error.
type WasmerError = PeerError<virtual_fs::FsError>;

/// An I/O error of ours (a busy buffer, a seek that landed elsewhere, a pending future).
#[cold]
fn io_error(what: String) -> WasmerError {
    PeerError::Io(std::io::Error::other(what))
}

/// Polls `f` once: `mem_fs`'s futures complete on their first poll (see the module doc).
///
/// # Errors
///
/// `f` returned `Pending`.
#[inline]
fn now<F: std::future::Future>(f: F) -> std::result::Result<F::Output, WasmerError> {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => Ok(v),
        std::task::Poll::Pending => Err(io_error("a mem_fs future did not complete".to_owned())),
    }
}

impl<'a> WasmerCalls<'a> {
    /// The calls on `fs`, with the shared handle `shared` (fstat-shared) and this thread's
    /// own handle `own` (read-shared, futimes).
    fn new(
        fs: &'a MemFs,
        remove_lock: &'a Mutex<()>,
        shared: Option<&'a (dyn VirtualFile + Send + Sync)>,
        own: Option<Handle>,
    ) -> Self {
        WasmerCalls {
            fs,
            remove_lock,
            path: RefCell::new(Vec::new()),
            shared,
            own: RefCell::new(own),
        }
    }

    /// Calls `f` with `name` below `dir`, or `name` itself when `dir` is `None` or empty.
    #[inline]
    fn at<R>(
        &self,
        dir: Option<&Path>,
        name: &Path,
        f: impl FnOnce(&Path) -> std::result::Result<R, WasmerError>,
    ) -> std::result::Result<R, WasmerError> {
        match dir {
            Some(dir) if !dir.as_os_str().is_empty() => {
                let mut path = self
                    .path
                    .try_borrow_mut()
                    .map_err(|_| io_error("path buffer in use".to_owned()))?;
                path.clear();
                path.extend_from_slice(dir.as_os_str().as_bytes());
                path.push(b'/');
                path.extend_from_slice(name.as_os_str().as_bytes());
                f(Path::new(OsStr::from_bytes(&path)))
            }
            _ => f(name),
        }
    }

    /// Calls `f` with this thread's own handle of the shared file.
    #[inline]
    fn own<R>(
        &self,
        f: impl FnOnce(&mut Handle) -> std::result::Result<R, WasmerError>,
    ) -> std::result::Result<R, WasmerError> {
        let mut own = self
            .own
            .try_borrow_mut()
            .map_err(|_| io_error("own handle in use".to_owned()))?;
        match own.as_mut() {
            Some(h) => f(h),
            None => Err(io_error("no handle of the shared file".to_owned())),
        }
    }
}

impl<'a> Calls for WasmerCalls<'a> {
    type Fd = Handle;
    type At = &'a Path;
    type Path = Path;
    type Times = u64;
    type Error = WasmerError;

    fn times(t: (i64, i64)) -> u64 {
        nanos(t)
    }

    fn dup(&self, _: &'a Path) -> std::result::Result<Handle, WasmerError> {
        Err(PeerError::Unsupported(Unsupported("dup")))
    }

    #[inline]
    fn close(&self, fd: Handle) -> std::result::Result<(), WasmerError> {
        drop(fd);
        Ok(())
    }

    fn getpid(&self) -> std::result::Result<u32, WasmerError> {
        Err(PeerError::Unsupported(Unsupported("getpid")))
    }

    fn getuid(&self) -> std::result::Result<u32, WasmerError> {
        Err(PeerError::Unsupported(Unsupported("getuid")))
    }

    fn umask(&self, _: u32) -> std::result::Result<u32, WasmerError> {
        Err(PeerError::Unsupported(Unsupported("umask")))
    }

    #[inline]
    fn openat(
        &self,
        dir: Option<&'a Path>,
        path: &Path,
        how: Open,
    ) -> std::result::Result<Handle, WasmerError> {
        self.at(dir, path, |path| {
            let mut o = self.fs.new_open_options();
            match how {
                Open::Read => o.read(true),
                Open::CreateTrunc => o.write(true).create(true).truncate(true),
            };
            o.open(path).map_err(PeerError::Fs)
        })
    }

    #[inline]
    fn unlinkat(&self, dir: &'a Path, path: &Path) -> std::result::Result<(), WasmerError> {
        self.at(Some(dir), path, |path| {
            let guard = self
                .remove_lock
                .lock()
                .map_err(|_| io_error("remove_lock poisoned".to_owned()))?;
            let r = self.fs.remove_file(path).map_err(PeerError::Fs);
            drop(guard);
            r
        })
    }

    #[inline]
    fn fstat(&self, _: &'a Path) -> std::result::Result<Stat, WasmerError> {
        let Some(f) = self.shared else {
            return Err(io_error("no shared handle".to_owned()));
        };
        // size() has no error: 0 if the lock is poisoned or the inode gone (the loop's
        // size check then fails).
        Ok(Stat {
            mode: S_IFREG | FILE_MODE,
            size: i64::try_from(f.size()).unwrap_or(i64::MAX),
        })
    }

    #[inline]
    fn fstatat(
        &self,
        dir: Option<&'a Path>,
        path: &Path,
    ) -> std::result::Result<Stat, WasmerError> {
        self.at(dir, path, |path| {
            let meta = self.fs.metadata(path).map_err(PeerError::Fs)?;
            Ok(Stat {
                mode: if meta.is_file() {
                    S_IFREG | FILE_MODE
                } else if meta.is_dir() {
                    S_IFDIR | DIR_MODE
                } else {
                    0
                },
                // Past i64::MAX: the loops' size checks fail on it, loudly.
                size: i64::try_from(meta.len).unwrap_or(i64::MAX),
            })
        })
    }

    #[inline]
    fn read(&self, fd: &mut Handle, buf: &mut [u8]) -> std::result::Result<usize, WasmerError> {
        now(fd.read(buf))?.map_err(PeerError::Io)
    }

    #[inline]
    fn pread(
        &self,
        _: &'a Path,
        buf: &mut [u8],
        off: u64,
    ) -> std::result::Result<usize, WasmerError> {
        self.own(|h| {
            let pos = now(h.seek(SeekFrom::Start(off)))?.map_err(PeerError::Io)?;
            if pos != off {
                return Err(io_error(format!("seek({off}) landed at {pos}")));
            }
            now(h.read(buf))?.map_err(PeerError::Io)
        })
    }

    #[inline]
    fn futimens(&self, _: &'a Path, times: &u64) -> std::result::Result<(), WasmerError> {
        self.own(|h| {
            h.set_times(Some(*times), Some(*times))
                .map_err(PeerError::Fs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every supported workload runs with 1 and 2 threads, teardown checks
    /// pass, and `/bench` is left empty.
    #[test]
    fn runs_every_supported_workload_and_cleans_up() {
        let mut target = WasmerTarget::new().unwrap();
        super::super::tests::run_every_supported_workload(&mut target);
        assert_eq!(target.fs.read_dir(Path::new("/bench")).unwrap().count(), 0);
        target.fs.remove_dir(Path::new("/bench")).unwrap();
    }

    /// Leftover files fail the teardown, naming them.
    #[test]
    fn teardown_fails_on_leftovers() {
        let mut target = WasmerTarget::new().unwrap();
        drop(target.setup(&Workload::OpenClose, 2).unwrap());
        target.create_file("/bench/run1/stray", b"").unwrap();
        let e = target.teardown().unwrap_err().to_string();
        assert!(e.contains("holds 1 after the run: stray"), "{e}");
    }

    /// `syscall` is declined, and `setup` refuses it.
    #[test]
    fn declines_syscall() {
        let mut target = WasmerTarget::new().unwrap();
        assert!(!target.supports(WorkloadKind::Syscall));
        assert!(target.setup(&Workload::Syscall, 1).is_err());
        target.teardown().unwrap();
    }

    /// The imported tree keeps its symlinks (mem_fs has them).
    #[test]
    fn tree_import_keeps_symlinks() {
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("a.h"), b"a").unwrap();
        std::os::unix::fs::symlink("a.h", src.path().join("l.h")).unwrap();
        let tree = Arc::new(HostTree::read(src.path()).unwrap());
        let mut target = WasmerTarget::new().unwrap();
        drop(target.setup(&Workload::Tree(tree), 1).unwrap());
        target.teardown().unwrap();
        let link = target.fs.readlink(Path::new("/tree1/l.h")).unwrap();
        assert_eq!(link, Path::new("a.h"));
    }
}
