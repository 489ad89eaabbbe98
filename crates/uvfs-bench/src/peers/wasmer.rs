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
//! synchronous). As `virtual-fs`'s own tests do (`#[tokio::test]`), they
//! run on a tokio current-thread runtime: each worker that needs one builds
//! its own in setup and wraps each batch of operations in one
//! `Runtime::block_on` (so the runtime's cost, entering it and polling,
//! about 80 ns on this machine, is paid once per batch of 4 files or 256 reads, not
//! per call). `mem_fs`'s futures never return `Pending`.
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
use std::hint::black_box;
use std::io::SeekFrom;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::runtime::Runtime;
use virtual_fs::mem_fs::FileSystem as MemFs;
use virtual_fs::{AsyncReadExt as _, AsyncSeekExt as _, AsyncWriteExt as _};
use virtual_fs::{FileSystem as _, VirtualFile};

use super::{leftovers, unsupported};
use crate::error::{Context, Error, Result};
use crate::target::{Target, Worker};
use crate::workloads::{
    open_close_name, read_shared_offset, shared_byte, shared_contents, thread_order, HostTree,
    NameBuf, ReadBuf, SinkResult, TreeSink, Workload, WorkloadKind, FUTIMES_TIMES, READ_SHARED_LEN,
    SHARED_FILE_SIZE,
};

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
        let mut workers: Vec<Box<dyn Worker + '_>> = Vec::with_capacity(threads);
        for index in 0..threads {
            workers.push(match workload {
                Workload::CreatClo => {
                    let prefix = format!("{dir}/").into_bytes();
                    Box::new(CreatCloWorker {
                        fs,
                        remove_lock,
                        names: NameBuf::new(index),
                        prefix: prefix.len(),
                        path: prefix,
                    })
                }
                Workload::OpenClose => Box::new(OpenCloseWorker {
                    fs,
                    path: PathBuf::from(format!("{dir}/{}", open_close_name(index))),
                }),
                Workload::Tree(_) => {
                    let tree = tree.ok_or_else(|| Error::msg(format!("{NAME}: no tree")))?;
                    Box::new(TreeWorker {
                        fs,
                        rt: runtime()?,
                        paths: &tree.paths,
                        sizes: &tree.sizes,
                        order: thread_order(tree.paths.len(), index),
                        pos: 0,
                        buf: ReadBuf::boxed(),
                    })
                }
                Workload::FstatShared => Box::new(FstatSharedWorker {
                    file: handle.ok_or_else(|| Error::msg(format!("{NAME}: no shared handle")))?,
                }),
                Workload::ReadShared => Box::new(ReadSharedWorker {
                    rt: runtime()?,
                    file: open_shared()?,
                    k: 0,
                    buf: ReadBuf::boxed(),
                }),
                Workload::Futimes => Box::new(FutimesWorker {
                    file: open_shared()?,
                    times: FUTIMES_TIMES.map(nanos),
                }),
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

/// `creat-clo` on `mem_fs`: open with create and truncate, drop, remove
/// (under the target's `remove_lock`).
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
struct CreatCloWorker<'a> {
    /// The file system.
    fs: &'a MemFs,
    /// The target's `remove_lock`, held around `remove_file`.
    remove_lock: &'a Mutex<()>,
    /// This thread's file names.
    names: NameBuf,
    /// `/bench/runN/` followed by the current name.
    path: Vec<u8>,
    /// Length of the `/bench/runN/` prefix of `path`.
    prefix: usize,
}

impl Worker for CreatCloWorker<'_> {
    fn run(&mut self, n: u32) -> Result<()> {
        let fs = self.fs;
        for _ in 0..n {
            self.names.advance();
            self.path.truncate(self.prefix);
            self.path.extend_from_slice(self.names.name());
            let path = Path::new(OsStr::from_bytes(&self.path));
            let f = fs
                .new_open_options()
                .write(true)
                .create(true)
                .truncate(true)
                .open(path)
                .with_context(|| format!("{NAME} creat-clo: open({})", path.display()))?;
            drop(f);
            let guard = self
                .remove_lock
                .lock()
                .map_err(|_| Error::msg(format!("{NAME} creat-clo: remove_lock poisoned")))?;
            fs.remove_file(path)
                .with_context(|| format!("{NAME} creat-clo: remove_file({})", path.display()))?;
            drop(guard);
        }
        Ok(())
    }
}

/// `open-close` on `mem_fs`: open this thread's own file, drop the handle.
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
struct OpenCloseWorker<'a> {
    /// The file system.
    fs: &'a MemFs,
    /// `/bench/runN/f<thread>`.
    path: PathBuf,
}

impl Worker for OpenCloseWorker<'_> {
    fn run(&mut self, n: u32) -> Result<()> {
        let path = self.path.as_path();
        for _ in 0..n {
            let f = self
                .fs
                .new_open_options()
                .read(true)
                .open(path)
                .with_context(|| format!("{NAME} open-close: open({})", path.display()))?;
            drop(black_box(f));
        }
        Ok(())
    }
}

/// `tree` on `mem_fs`: metadata, open, read all, drop, file after file in
/// this thread's order.
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
struct TreeWorker<'a> {
    /// The file system.
    fs: &'a MemFs,
    /// This worker's runtime, for the reads.
    rt: Runtime,
    /// The tree's regular files, absolute.
    paths: &'a [PathBuf],
    /// Their sizes on the host.
    sizes: &'a [u64],
    /// This thread's order over `paths`.
    order: Vec<u32>,
    /// Next index into `order`.
    pos: usize,
    /// The read buffer.
    buf: Box<ReadBuf>,
}

impl Worker for TreeWorker<'_> {
    fn run(&mut self, n: u32) -> Result<()> {
        let TreeWorker {
            fs,
            rt,
            paths,
            sizes,
            order,
            pos,
            buf,
        } = self;
        // By value: through `&mut &MemFs`, method lookup would pick
        // virtual-fs's blanket `FileSystem` impl for `Deref` types, which
        // needs `'static`.
        let fs: &MemFs = fs;
        rt.block_on(async {
            for _ in 0..n {
                let i = order[*pos] as usize;
                *pos = (*pos + 1) % order.len();
                let path = paths[i].as_path();
                let show = || path.display();
                let meta = fs
                    .metadata(path)
                    .with_context(|| format!("{NAME} tree: metadata({})", show()))?;
                if !meta.is_file() {
                    return Err(Error::msg(format!(
                        "{NAME} tree: {} is not a file ({:?})",
                        show(),
                        meta.ft
                    )));
                }
                let mut f = fs
                    .new_open_options()
                    .read(true)
                    .open(path)
                    .with_context(|| format!("{NAME} tree: open({})", show()))?;
                let mut total = 0u64;
                loop {
                    let got = f
                        .read(&mut buf.0)
                        .await
                        .with_context(|| format!("{NAME} tree: read({})", show()))?;
                    if got == 0 {
                        break;
                    }
                    total += got as u64;
                }
                drop(f);
                if total != sizes[i] || total != meta.len {
                    return Err(Error::msg(format!(
                        "{NAME} tree: {}: read {total} bytes, len {}, host size {}",
                        show(),
                        meta.len,
                        sizes[i]
                    )));
                }
            }
            Ok(())
        })
    }
}

/// `fstat-shared` on `mem_fs`: `size()` on the one shared handle.
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
struct FstatSharedWorker<'a> {
    /// The run's one handle of `/bench/runN/shared`, shared by every worker.
    file: &'a (dyn VirtualFile + Send + Sync),
}

impl Worker for FstatSharedWorker<'_> {
    fn run(&mut self, n: u32) -> Result<()> {
        for _ in 0..n {
            // size() has no error: 0 if the lock is poisoned or the inode gone.
            let size = self.file.size();
            if size != SHARED_FILE_SIZE {
                return Err(Error::msg(format!(
                    "{NAME} fstat-shared: size() = {size}, expected {SHARED_FILE_SIZE}"
                )));
            }
        }
        Ok(())
    }
}

/// `read-shared` on `mem_fs`: seek and one 4 KiB read on this thread's own
/// handle of the shared file, page after page.
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
struct ReadSharedWorker {
    /// This worker's runtime, for the seeks and reads.
    rt: Runtime,
    /// This thread's handle of `/bench/runN/shared`.
    file: Handle,
    /// This thread's reads so far (the next one's `k`).
    k: u64,
    /// The read buffer (only its first [`READ_SHARED_LEN`] bytes are used).
    buf: Box<ReadBuf>,
}

impl Worker for ReadSharedWorker {
    fn run(&mut self, n: u32) -> Result<()> {
        let ReadSharedWorker { rt, file, k, buf } = self;
        rt.block_on(async {
            for _ in 0..n {
                let off = read_shared_offset(*k);
                *k += 1;
                let pos = file
                    .seek(SeekFrom::Start(off))
                    .await
                    .with_context(|| format!("{NAME} read-shared: seek({off})"))?;
                let buf = &mut buf.0[..READ_SHARED_LEN];
                let got = file
                    .read(buf)
                    .await
                    .with_context(|| format!("{NAME} read-shared: read at {off}"))?;
                if pos != off || got != READ_SHARED_LEN || buf[0] != shared_byte(off) {
                    return Err(Error::msg(format!(
                        "{NAME} read-shared: seek({off}) to {pos}, read {got} bytes, first {}, \
                         expected {READ_SHARED_LEN} bytes, first {}",
                        buf[0],
                        shared_byte(off)
                    )));
                }
            }
            Ok(())
        })
    }
}

/// `futimes` on `mem_fs`: `set_times(t1)`, `set_times(t2)` on this
/// thread's own handle of the shared file.
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
struct FutimesWorker {
    /// This thread's handle of `/bench/runN/shared`.
    file: Handle,
    /// The two times set alternately (as atime and mtime), in ns.
    times: [u64; 2],
}

impl Worker for FutimesWorker {
    fn run(&mut self, n: u32) -> Result<()> {
        for _ in 0..n {
            for t in self.times {
                self.file
                    .set_times(Some(t), Some(t))
                    .with_context(|| format!("{NAME} futimes: set_times({t})"))?;
            }
        }
        Ok(())
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
