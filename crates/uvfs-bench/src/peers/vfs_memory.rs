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
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::sync::Arc;

use vfs::{FileSystem as _, MemoryFS, SeekAndRead, SeekAndWrite, VfsFileType};

use super::{leftovers, unsupported, PeerError};
use crate::calls::{Calls, Open, Stat, Unsupported};
use crate::error::{Context, Error, Result};
use crate::loops;
use crate::target::{Target, Worker};
use crate::workloads::{
    open_close_name, shared_contents, HostTree, SinkResult, TreeSink, Workload, WorkloadKind,
    DIR_MODE, FILE_MODE, S_IFREG,
};

/// `S_IFDIR`: a directory's file-type bits of `st_mode`.
const S_IFDIR: u32 = 0o040_000;

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

/// An open file of `MemoryFS` (the tree import's, and [`VfsCalls`]'s descriptor): the
/// writer `create_file` returns or the reader `open_file` returns.
pub enum VfsFile {
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
        let run_dir = self
            .run
            .as_ref()
            .map(|r| r.dir.as_str())
            .ok_or_else(|| Error::msg(format!("{NAME}: no run")))?;
        let mut workers: Vec<Box<dyn Worker + '_>> = Vec::with_capacity(threads);
        for index in 0..threads {
            let calls = VfsCalls::new(fs, None);
            workers.push(match workload {
                Workload::CreatClo => Box::new(loops::CreatClo::new(NAME, calls, run_dir, index)),
                Workload::OpenClose => Box::new(loops::OpenClose::new(
                    NAME,
                    calls,
                    format!("{dir}/{}", open_close_name(index)),
                )),
                Workload::Tree(_) => {
                    let tree = tree.ok_or_else(|| Error::msg(format!("{NAME}: no tree")))?;
                    // The paths are absolute: no directory to join them to.
                    Box::new(loops::Tree::new(
                        NAME,
                        calls,
                        "",
                        &tree.paths,
                        &tree.sizes,
                        index,
                    ))
                }
                Workload::ReadShared => {
                    let path = format!("{dir}/shared");
                    let file = fs
                        .open_file(&path)
                        .with_context(|| format!("{NAME}: open_file({path})"))?;
                    Box::new(loops::ReadShared::new(
                        NAME,
                        VfsCalls::new(fs, Some(file)),
                        run_dir,
                    ))
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

/// `MemoryFS`'s [`Calls`]: its `FileSystem` trait's calls with absolute `&str` paths.
///
/// How it spells each call: a directory ([`Calls::At`]) is its absolute path, `""` for
/// "paths are absolute already" (the tree's and open-close's, built once in setup); a name
/// below a directory is joined into a buffer of this thread's, reused (no allocation per
/// call once grown). `openat` is `open_file` (read) or `create_file` (create or truncate),
/// `close` drops the handle (a writer's drop flushes), `unlinkat` is `remove_file`,
/// `fstatat` is `metadata` (file type and length), `read` is the handle's `Read`. `pread`
/// is `seek` and `read` on this thread's own reader of the shared file, opened in setup
/// (`MemoryFS` has no positional read, and a reader is not `Sync`). No `dup`, `fstat`,
/// `futimens`, `getpid`, `getuid` or `umask`: those answer [`Unsupported`].
pub struct VfsCalls<'a> {
    /// The file system.
    fs: &'a MemoryFS,
    /// A directory's path and a name joined, for the `*at` calls.
    path: RefCell<String>,
    /// `read-shared`: this thread's own reader of the shared file.
    reader: RefCell<Option<Box<dyn SeekAndRead + Send>>>,
}

impl std::fmt::Debug for VfsCalls<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VfsCalls").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for VfsFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            VfsFile::Write(_) => "VfsFile::Write",
            VfsFile::Read(_) => "VfsFile::Read",
        })
    }
}

/// A `MemoryFS` call's error.
type VfsCallError = PeerError<vfs::VfsError>;

/// An I/O error of ours (a handle of the wrong kind, a seek that landed elsewhere).
#[cold]
fn io_error(what: String) -> VfsCallError {
    PeerError::Io(std::io::Error::other(what))
}

impl<'a> VfsCalls<'a> {
    /// The calls on `fs`; `reader`: this thread's reader of the shared file (read-shared).
    fn new(fs: &'a MemoryFS, reader: Option<Box<dyn SeekAndRead + Send>>) -> Self {
        VfsCalls {
            fs,
            path: RefCell::new(String::new()),
            reader: RefCell::new(reader),
        }
    }

    /// Calls `f` with `name` below `dir` (absolute), or `name` itself when `dir` is
    /// `None` or `""`.
    #[inline]
    fn at<R>(
        &self,
        dir: Option<&str>,
        name: &str,
        f: impl FnOnce(&str) -> std::result::Result<R, VfsCallError>,
    ) -> std::result::Result<R, VfsCallError> {
        match dir {
            Some(dir) if !dir.is_empty() => {
                let mut path = self
                    .path
                    .try_borrow_mut()
                    .map_err(|_| io_error("path buffer in use".to_owned()))?;
                path.clear();
                path.push_str(dir);
                path.push('/');
                path.push_str(name);
                f(&path)
            }
            _ => f(name),
        }
    }
}

impl<'a> Calls for VfsCalls<'a> {
    type Fd = VfsFile;
    type At = &'a str;
    type Path = str;
    type Times = ();
    type Error = VfsCallError;

    fn times(_: (i64, i64)) {}

    fn dup(&self, _: &'a str) -> std::result::Result<VfsFile, VfsCallError> {
        Err(PeerError::Unsupported(Unsupported("dup")))
    }

    #[inline]
    fn close(&self, fd: VfsFile) -> std::result::Result<(), VfsCallError> {
        // A writer's drop flushes (and panics if that fails, which the harness reports as
        // this worker's failure).
        drop(fd);
        Ok(())
    }

    fn getpid(&self) -> std::result::Result<u32, VfsCallError> {
        Err(PeerError::Unsupported(Unsupported("getpid")))
    }

    fn getuid(&self) -> std::result::Result<u32, VfsCallError> {
        Err(PeerError::Unsupported(Unsupported("getuid")))
    }

    fn umask(&self, _: u32) -> std::result::Result<u32, VfsCallError> {
        Err(PeerError::Unsupported(Unsupported("umask")))
    }

    #[inline]
    fn openat(
        &self,
        dir: Option<&'a str>,
        path: &str,
        how: Open,
    ) -> std::result::Result<VfsFile, VfsCallError> {
        self.at(dir, path, |path| {
            match how {
                Open::Read => self.fs.open_file(path).map(VfsFile::Read),
                Open::CreateTrunc => self.fs.create_file(path).map(VfsFile::Write),
            }
            .map_err(PeerError::Fs)
        })
    }

    #[inline]
    fn unlinkat(&self, dir: &'a str, path: &str) -> std::result::Result<(), VfsCallError> {
        self.at(Some(dir), path, |path| {
            self.fs.remove_file(path).map_err(PeerError::Fs)
        })
    }

    fn fstat(&self, _: &'a str) -> std::result::Result<Stat, VfsCallError> {
        Err(PeerError::Unsupported(Unsupported("stat on a handle")))
    }

    #[inline]
    fn fstatat(&self, dir: Option<&'a str>, path: &str) -> std::result::Result<Stat, VfsCallError> {
        self.at(dir, path, |path| {
            let meta = self.fs.metadata(path).map_err(PeerError::Fs)?;
            Ok(Stat {
                mode: match meta.file_type {
                    VfsFileType::File => S_IFREG | FILE_MODE,
                    VfsFileType::Directory => S_IFDIR | DIR_MODE,
                },
                // Past i64::MAX: the loops' size checks fail on it, loudly.
                size: i64::try_from(meta.len).unwrap_or(i64::MAX),
            })
        })
    }

    #[inline]
    fn read(&self, fd: &mut VfsFile, buf: &mut [u8]) -> std::result::Result<usize, VfsCallError> {
        match fd {
            VfsFile::Read(r) => r.read(buf).map_err(PeerError::Io),
            VfsFile::Write(_) => Err(io_error("read on a file opened for writing".to_owned())),
        }
    }

    #[inline]
    fn pread(
        &self,
        _: &'a str,
        buf: &mut [u8],
        off: u64,
    ) -> std::result::Result<usize, VfsCallError> {
        let mut reader = self
            .reader
            .try_borrow_mut()
            .map_err(|_| io_error("reader in use".to_owned()))?;
        let Some(r) = reader.as_mut() else {
            return Err(io_error("no reader of the shared file".to_owned()));
        };
        let pos = r.seek(SeekFrom::Start(off)).map_err(PeerError::Io)?;
        if pos != off {
            return Err(io_error(format!("seek({off}) landed at {pos}")));
        }
        r.read(buf).map_err(PeerError::Io)
    }

    fn futimens(&self, _: &'a str, _: &()) -> std::result::Result<(), VfsCallError> {
        Err(PeerError::Unsupported(Unsupported("futimens on a handle")))
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
