//! The `vfs` crate's `MemoryFS` as a [`Target`] (`vfs-memoryfs`): the
//! workloads through its `FileSystem` trait, called directly with absolute
//! `&str` paths (not through `VfsPath`, whose joins would add an allocation
//! per call that no other target pays).
//!
//! What `MemoryFS` is (vfs 0.13, src/impls/memory.rs): one
//! `Arc<RwLock<HashMap<String, MemoryFile>>>` keyed by the full path, a
//! file's bytes an `Arc<Vec<u8>>`. So every call takes that one lock:
//!
//! - `create_file`: read lock (parent exists), write lock (insert, which
//!   truncates); dropping the writer flushes: write lock, insert again.
//! - `remove_file`: write lock. `metadata`: read lock.
//! - `open_file`: write lock (sets the access time), then read lock (clone
//!   the contents' `Arc`); the reader then reads that snapshot, lock-free.
//!
//! One operation of each supported workload:
//!
//! - `creat-clo`: `create_file("/bench/runN/t<thread>-<k>")` (create or
//!   truncate), drop the writer (its flush), `remove_file`.
//! - `open-close`: `open_file("/bench/runN/f<thread>")`, drop the reader.
//! - `tree`: `metadata(path)` (checked a file of the host's size),
//!   `open_file`, read to the end with a 64 KiB buffer, drop.
//! - `read-shared`: `seek(Start(off))` and one 4 KiB `read` on this
//!   thread's own reader of `/bench/runN/shared`, opened in setup. A reader
//!   is `Send` but not `Sync` and `MemoryFS` has no positional read, so
//!   threads cannot share one handle without a lock of ours; each has its
//!   own, which reads a snapshot taken at open with no lock at all. This
//!   measures `MemoryFS`'s read path, not a shared open file.
//!
//! Unsupported: `syscall` (no dup, pid, uid or umask), `futimes` (times are
//! set by path only, `set_modification_time`), `fstat-shared` (no stat on a
//! handle, only `metadata(path)`).
//!
//! The tree is imported without its symlinks (`MemoryFS` has none; the
//! workload visits regular files only, on paths that cross no symlink);
//! a path that is not UTF-8 fails the import (vfs paths are `&str`).
//!
//! Lock order: none of ours; `MemoryFS`'s one lock is taken and released
//! inside each call.

use std::cell::RefCell;
use std::hint::black_box;
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::sync::Arc;

use vfs::{FileSystem as _, MemoryFS, SeekAndRead, SeekAndWrite, VfsFileType};

use super::{leftovers, unsupported};
use crate::error::{Context, Error, Result};
use crate::target::{Target, Worker};
use crate::workloads::{
    open_close_name, read_shared_offset, shared_byte, shared_contents, thread_order, HostTree,
    NameBuf, ReadBuf, SinkResult, TreeSink, Workload, WorkloadKind, READ_SHARED_LEN,
};

/// The target's name in tables, JSON and `--target`.
const NAME: &str = "vfs-memoryfs";

/// The `vfs` crate's `MemoryFS`, as a [`Target`].
#[derive(Debug)]
pub struct VfsMemoryTarget {
    /// The file system: `/bench`, the runs under it, the imported tree.
    fs: MemoryFS,
    /// The current run; `None` between runs.
    run: Option<VfsRun>,
    /// The imported tree, once a `tree` run has needed it.
    tree: Option<VfsTree>,
    /// Runs set up so far, to name each run's directory.
    runs: u64,
    /// Trees imported so far, to name each tree's directory.
    trees: u64,
}

/// One run's state, for teardown.
#[derive(Debug)]
struct VfsRun {
    /// The run's directory, e.g. `/bench/run3`.
    dir: String,
    /// Whether `dir/shared` was created (`read-shared`).
    shared: bool,
    /// `open-close`'s files `dir/f0`, `dir/f1`, ... created so far.
    own_files: usize,
}

/// The tree imported into the file system.
#[derive(Debug)]
struct VfsTree {
    /// What was imported (compared by pointer to know if a run's tree is it).
    source: Arc<HostTree>,
    /// The regular files' absolute paths, e.g. `/tree1/stdio.h`, in
    /// `source.files` order.
    paths: Vec<String>,
    /// Their sizes, same order.
    sizes: Vec<u64>,
}

impl VfsMemoryTarget {
    /// A fresh `MemoryFS` with `/bench`.
    ///
    /// # Errors
    ///
    /// `create_dir("/bench")` fails.
    pub fn new() -> Result<VfsMemoryTarget> {
        let fs = MemoryFS::new();
        fs.create_dir("/bench")
            .with_context(|| format!("{NAME}: create_dir(/bench)"))?;
        Ok(VfsMemoryTarget {
            fs,
            run: None,
            tree: None,
            runs: 0,
            trees: 0,
        })
    }

    /// Copies `source` into `/treeN` (symlinks left out) and checks every
    /// file reads back as on the host.
    fn import_tree(&mut self, source: &Arc<HostTree>) -> Result<()> {
        self.trees += 1;
        let dir = format!("/tree{}", self.trees);
        self.fs
            .create_dir(&dir)
            .with_context(|| format!("{NAME}: create_dir({dir})"))?;
        let mut sink = VfsSink {
            fs: &self.fs,
            dir: &dir,
        };
        source.import(&mut sink, &format!("{NAME} {dir}"))?;
        let paths = source
            .file_paths()
            .map(|rel| sink.path(rel))
            .collect::<SinkResult<Vec<String>>>()
            .map_err(|e| Error::msg(format!("{NAME} {dir}: {e}")))?;
        self.tree = Some(VfsTree {
            source: Arc::clone(source),
            paths,
            sizes: source.file_sizes().collect(),
        });
        Ok(())
    }

    /// Creates `path` holding `data` (write, then the writer's flush).
    fn create_file(&self, path: &str, data: &[u8]) -> Result<()> {
        let mut w = self
            .fs
            .create_file(path)
            .with_context(|| format!("{NAME}: create_file({path})"))?;
        w.write_all(data)
            .and_then(|()| w.flush())
            .with_context(|| format!("{NAME}: write({path})"))
    }
}

/// An open file during the tree import: the writer `create` returns or the
/// reader `open` returns.
enum VfsFile {
    /// From `create_file`; its bytes land in the file on flush.
    Write(Box<dyn SeekAndWrite + Send>),
    /// From `open_file`.
    Read(Box<dyn SeekAndRead + Send>),
}

/// `MemoryFS`'s calls for [`HostTree::import`], below the tree's directory.
#[derive(Debug)]
struct VfsSink<'a> {
    /// The file system.
    fs: &'a MemoryFS,
    /// The tree's directory, e.g. `/tree1`.
    dir: &'a str,
}

impl VfsSink<'_> {
    /// The absolute path of `rel`.
    ///
    /// # Errors
    ///
    /// `rel` is not UTF-8 (vfs paths are `&str`).
    fn path(&self, rel: &[u8]) -> SinkResult<String> {
        Ok(format!("{}/{}", self.dir, std::str::from_utf8(rel)?))
    }
}

impl TreeSink for VfsSink<'_> {
    type File = RefCell<VfsFile>;

    fn mkdir(&mut self, rel: &[u8], _mode: u32) -> SinkResult<()> {
        Ok(self.fs.create_dir(&self.path(rel)?)?)
    }

    fn create(&mut self, rel: &[u8], _mode: u32) -> SinkResult<Self::File> {
        let path = self.path(rel)?;
        // O_EXCL: the import creates every file once.
        if self.fs.exists(&path)? {
            return Err(format!("{path} exists").into());
        }
        Ok(RefCell::new(VfsFile::Write(self.fs.create_file(&path)?)))
    }

    fn open(&mut self, rel: &[u8]) -> SinkResult<Self::File> {
        Ok(RefCell::new(VfsFile::Read(
            self.fs.open_file(&self.path(rel)?)?,
        )))
    }

    fn write(&mut self, file: &Self::File, data: &[u8]) -> SinkResult<usize> {
        match &mut *file.borrow_mut() {
            VfsFile::Write(w) => Ok(w.write(data)?),
            VfsFile::Read(_) => Err("write on a file opened for reading".into()),
        }
    }

    fn read(&mut self, file: &Self::File, buf: &mut [u8]) -> SinkResult<usize> {
        match &mut *file.borrow_mut() {
            VfsFile::Read(r) => Ok(r.read(buf)?),
            VfsFile::Write(_) => Err("read on a file opened for writing".into()),
        }
    }

    fn close(&mut self, file: Self::File) -> SinkResult<()> {
        // The writer's flush stores its bytes (its drop would flush too, but
        // panics on failure).
        match file.into_inner() {
            VfsFile::Write(mut w) => Ok(w.flush()?),
            VfsFile::Read(_) => Ok(()),
        }
    }

    fn symlink(&mut self, _target: &[u8], _rel: &[u8]) -> SinkResult<()> {
        // MemoryFS has no symlinks; the `tree` workload never visits one.
        Ok(())
    }
}

impl Target for VfsMemoryTarget {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> String {
        "vfs 0.13 MemoryFS (one RwLock over a HashMap of paths), FileSystem trait calls with \
         absolute paths, each thread its own; close = drop; read-shared: each thread its own \
         reader of the shared file (a snapshot, read with no lock): seek + 4 KiB read; \
         no syscall, futimes, fstat-shared (no dup/umask, no handle times or stat)"
            .to_owned()
    }

    fn supports(&self, kind: WorkloadKind) -> bool {
        matches!(
            kind,
            WorkloadKind::CreatClo
                | WorkloadKind::OpenClose
                | WorkloadKind::Tree
                | WorkloadKind::ReadShared
        )
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
            .create_dir(&dir)
            .with_context(|| format!("{NAME}: create_dir({dir})"))?;
        self.run = Some(VfsRun {
            dir: dir.clone(),
            shared: false,
            own_files: 0,
        });
        match workload {
            Workload::ReadShared => {
                let path = format!("{dir}/shared");
                self.create_file(&path, &shared_contents())?;
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
        let fs = &self.fs;
        let tree = self.tree.as_ref();
        let mut workers: Vec<Box<dyn Worker + '_>> = Vec::with_capacity(threads);
        for index in 0..threads {
            workers.push(match workload {
                Workload::CreatClo => {
                    let prefix = format!("{dir}/");
                    Box::new(CreatCloWorker {
                        fs,
                        names: NameBuf::new(index),
                        prefix: prefix.len(),
                        path: prefix,
                    })
                }
                Workload::OpenClose => Box::new(OpenCloseWorker {
                    fs,
                    path: format!("{dir}/{}", open_close_name(index)),
                }),
                Workload::Tree(_) => {
                    let tree = tree.ok_or_else(|| Error::msg(format!("{NAME}: no tree")))?;
                    Box::new(TreeWorker {
                        fs,
                        paths: &tree.paths,
                        sizes: &tree.sizes,
                        order: thread_order(tree.paths.len(), index),
                        pos: 0,
                        buf: ReadBuf::boxed(),
                    })
                }
                Workload::ReadShared => {
                    let path = format!("{dir}/shared");
                    let file = fs
                        .open_file(&path)
                        .with_context(|| format!("{NAME}: open_file({path})"))?;
                    Box::new(ReadSharedWorker {
                        file,
                        k: 0,
                        buf: ReadBuf::boxed(),
                    })
                }
                Workload::Syscall
                | Workload::Futimes
                | Workload::FstatShared
                | Workload::StatPath => {
                    return Err(unsupported(NAME, workload.kind()));
                }
            });
        }
        Ok(workers)
    }

    fn teardown(&mut self) -> Result<()> {
        let Some(run) = self.run.take() else {
            return Ok(());
        };
        let VfsRun {
            dir,
            shared,
            own_files,
        } = run;
        let mut made: Vec<String> = (0..own_files).map(open_close_name).collect();
        if shared {
            made.push("shared".to_owned());
        }
        for name in &made {
            let path = format!("{dir}/{name}");
            self.fs
                .remove_file(&path)
                .with_context(|| format!("{NAME}: remove_file({path})"))?;
        }
        // Anything left is a workload's leftover (creat-clo must remove every
        // file it creates).
        let mut left: Vec<String> = self
            .fs
            .read_dir(&dir)
            .with_context(|| format!("{NAME}: read_dir({dir}) after the run"))?
            .collect();
        if !left.is_empty() {
            left.sort_unstable();
            return Err(Error::msg(format!(
                "{NAME}: {dir} holds {} after the run: {}",
                left.len(),
                leftovers(&left)
            )));
        }
        self.fs
            .remove_dir(&dir)
            .with_context(|| format!("{NAME}: remove_dir({dir}) after the run"))
    }
}

/// `creat-clo` on `MemoryFS`: create (truncating), drop the writer, remove.
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
struct CreatCloWorker<'a> {
    /// The file system.
    fs: &'a MemoryFS,
    /// This thread's file names.
    names: NameBuf,
    /// `/bench/runN/` followed by the current name.
    path: String,
    /// Length of the `/bench/runN/` prefix of `path`.
    prefix: usize,
}

impl Worker for CreatCloWorker<'_> {
    fn run(&mut self, n: u32) -> Result<()> {
        let fs = self.fs;
        for _ in 0..n {
            self.names.advance();
            self.path.truncate(self.prefix);
            // Names are `t<digits>-<digits>`: always UTF-8.
            let name = std::str::from_utf8(self.names.name())
                .with_context(|| format!("{NAME} creat-clo: file name"))?;
            self.path.push_str(name);
            let path = self.path.as_str();
            let w = fs
                .create_file(path)
                .with_context(|| format!("{NAME} creat-clo: create_file({path})"))?;
            // Close: the writer's drop flushes (and panics if that fails,
            // which the harness reports as this worker's failure).
            drop(w);
            fs.remove_file(path)
                .with_context(|| format!("{NAME} creat-clo: remove_file({path})"))?;
        }
        Ok(())
    }
}

/// `open-close` on `MemoryFS`: open this thread's own file, drop the reader.
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
struct OpenCloseWorker<'a> {
    /// The file system.
    fs: &'a MemoryFS,
    /// `/bench/runN/f<thread>`.
    path: String,
}

impl Worker for OpenCloseWorker<'_> {
    fn run(&mut self, n: u32) -> Result<()> {
        let path = self.path.as_str();
        for _ in 0..n {
            let r = self
                .fs
                .open_file(path)
                .with_context(|| format!("{NAME} open-close: open_file({path})"))?;
            drop(black_box(r));
        }
        Ok(())
    }
}

/// `tree` on `MemoryFS`: metadata, open, read all, drop, file after file
/// in this thread's order.
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
struct TreeWorker<'a> {
    /// The file system.
    fs: &'a MemoryFS,
    /// The tree's regular files, absolute.
    paths: &'a [String],
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
        let fs = self.fs;
        for _ in 0..n {
            let i = self.order[self.pos] as usize;
            self.pos = (self.pos + 1) % self.order.len();
            let path = self.paths[i].as_str();
            let meta = fs
                .metadata(path)
                .with_context(|| format!("{NAME} tree: metadata({path})"))?;
            if meta.file_type != VfsFileType::File {
                return Err(Error::msg(format!(
                    "{NAME} tree: {path} is not a file ({:?})",
                    meta.file_type
                )));
            }
            let mut r = fs
                .open_file(path)
                .with_context(|| format!("{NAME} tree: open_file({path})"))?;
            let mut total = 0u64;
            loop {
                let got = r
                    .read(&mut self.buf.0)
                    .with_context(|| format!("{NAME} tree: read({path})"))?;
                if got == 0 {
                    break;
                }
                total += got as u64;
            }
            drop(r);
            if total != self.sizes[i] || total != meta.len {
                return Err(Error::msg(format!(
                    "{NAME} tree: {path}: read {total} bytes, len {}, host size {}",
                    meta.len, self.sizes[i]
                )));
            }
        }
        Ok(())
    }
}

/// `read-shared` on `MemoryFS`: seek and one 4 KiB read on this thread's
/// own reader of the shared file, page after page.
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
struct ReadSharedWorker {
    /// This thread's reader of `/bench/runN/shared`.
    file: Box<dyn SeekAndRead + Send>,
    /// This thread's reads so far (the next one's `k`).
    k: u64,
    /// The read buffer (only its first [`READ_SHARED_LEN`] bytes are used).
    buf: Box<ReadBuf>,
}

impl std::fmt::Debug for ReadSharedWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadSharedWorker")
            .field("k", &self.k)
            .finish_non_exhaustive()
    }
}

impl Worker for ReadSharedWorker {
    fn run(&mut self, n: u32) -> Result<()> {
        for _ in 0..n {
            let off = read_shared_offset(self.k);
            self.k += 1;
            let pos = self
                .file
                .seek(SeekFrom::Start(off))
                .with_context(|| format!("{NAME} read-shared: seek({off})"))?;
            let buf = &mut self.buf.0[..READ_SHARED_LEN];
            let got = self
                .file
                .read(buf)
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every supported workload runs with 1 and 2 threads, teardown checks
    /// pass, and `/bench` is left empty.
    #[test]
    fn runs_every_supported_workload_and_cleans_up() {
        let mut target = VfsMemoryTarget::new().unwrap();
        super::super::tests::run_every_supported_workload(&mut target);
        assert_eq!(target.fs.read_dir("/bench").unwrap().count(), 0);
        target.fs.remove_dir("/bench").unwrap();
    }

    /// Leftover files fail the teardown, naming them.
    #[test]
    fn teardown_fails_on_leftovers() {
        let mut target = VfsMemoryTarget::new().unwrap();
        drop(target.setup(&Workload::OpenClose, 2).unwrap());
        target.create_file("/bench/run1/stray", b"").unwrap();
        let e = target.teardown().unwrap_err().to_string();
        assert!(e.contains("holds 1 after the run: stray"), "{e}");
    }

    /// Unsupported workloads are declined, and `setup` refuses them.
    #[test]
    fn declines_what_memoryfs_lacks() {
        let mut target = VfsMemoryTarget::new().unwrap();
        for kind in [
            WorkloadKind::Syscall,
            WorkloadKind::Futimes,
            WorkloadKind::FstatShared,
        ] {
            assert!(!target.supports(kind));
        }
        assert!(target.setup(&Workload::Futimes, 1).is_err());
        target.teardown().unwrap();
    }
}
