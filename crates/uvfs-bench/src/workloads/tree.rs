//! A real directory tree read from the host into memory once, then imported
//! into each target (uvfs's tmpfs, the kernel peer's directory) so both read
//! the same files from memory.
//!
//! Kept: directories, regular files (their contents), symlinks (their targets
//! as-is, not followed). Skipped and counted: other file types (devices,
//! fifos, sockets), anything that cannot be read, and files that are not
//! plain data: on a pseudo file system (`/proc`, `/sys`, ...), holding more
//! than their `st_size` (growing, or generated with size 0), whose read
//! would block (tracefs's `trace_pipe`), or larger than [`MAX_FILE`] (64 MiB).

use std::io::Read as _;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

use serde::Serialize;

use crate::error::{Context, Error, Result};
use crate::interrupt;
use crate::workloads::{DIR_MODE, FILE_MODE, READ_BUF};

/// One entry of a [`HostTree`], below its root.
#[derive(Debug)]
pub struct TreeEntry {
    /// Path relative to the tree's root, components joined by `/`, never
    /// empty, no leading or trailing `/` (e.g. `sys/types.h`).
    pub rel: Vec<u8>,
    /// What the entry is, with its contents.
    pub kind: TreeEntryKind,
}

/// The kind of a [`TreeEntry`], with what is needed to recreate it.
#[derive(Debug)]
pub enum TreeEntryKind {
    /// A directory; its entries follow it in [`HostTree::entries`].
    Dir,
    /// A regular file and its contents.
    File(Vec<u8>),
    /// A symbolic link and its target, as stored (not resolved).
    Symlink(Vec<u8>),
}

/// Counts of what [`HostTree::read`] found.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct TreeStats {
    /// Directories below the root (the root not counted).
    pub dirs: u64,
    /// Regular files.
    pub files: u64,
    /// Total bytes in regular files.
    pub bytes: u64,
    /// Symbolic links.
    pub symlinks: u64,
    /// Entries left out: other file types, unreadable, or not plain data
    /// (pseudo file systems, growing or blocking files).
    pub skipped: u64,
}

/// A directory tree read from the host into memory.
///
/// # Invariants
///
/// Every entry's parent directory comes before it in `entries`, so importing
/// in order never needs a missing parent.
#[derive(Debug)]
pub struct HostTree {
    /// The host directory it was read from.
    pub root: PathBuf,
    /// Its entries, parents before children, siblings sorted by name.
    pub entries: Vec<TreeEntry>,
    /// Indices into `entries` of the regular files: the `tree` workload's
    /// file list.
    pub files: Vec<usize>,
    /// What was found and what was skipped.
    pub stats: TreeStats,
}

impl HostTree {
    /// Reads the tree under `root` (which must be a readable directory,
    /// symlinks to one followed) into memory.
    ///
    /// # Errors
    ///
    /// `root` cannot be listed, or holds no regular file to read, or a
    /// signal interrupted the benchmark ([`interrupt::check`]). Entries below
    /// it that cannot be read are skipped and counted, not errors.
    pub fn read(root: &Path) -> Result<HostTree> {
        let mut tree = HostTree {
            root: root.to_path_buf(),
            entries: Vec::new(),
            files: Vec::new(),
            stats: TreeStats::default(),
        };
        let top = list_dir(root).with_context(|| format!("reading tree {}", root.display()))?;
        // Depth-first, parents before children: a stack of (relative path,
        // sorted names still to visit, reversed so pop() yields them in order).
        let mut stack: Vec<(Vec<u8>, Vec<std::ffi::OsString>)> = vec![(Vec::new(), top)];
        while let Some((dir_rel, names)) = stack.last_mut() {
            interrupt::check().with_context(|| format!("reading tree {}", root.display()))?;
            let Some(name) = names.pop() else {
                stack.pop();
                continue;
            };
            let mut rel = dir_rel.clone();
            if !rel.is_empty() {
                rel.push(b'/');
            }
            rel.extend_from_slice(name.as_bytes());
            let host = root.join(std::ffi::OsStr::from_bytes(&rel));
            let Ok(meta) = std::fs::symlink_metadata(&host) else {
                tree.stats.skipped += 1;
                continue;
            };
            let ft = meta.file_type();
            if ft.is_dir() {
                match list_dir(&host) {
                    Ok(children) => {
                        tree.stats.dirs += 1;
                        tree.entries.push(TreeEntry {
                            rel: rel.clone(),
                            kind: TreeEntryKind::Dir,
                        });
                        stack.push((rel, children));
                    }
                    Err(_) => tree.stats.skipped += 1,
                }
            } else if ft.is_file() {
                match read_file(&host) {
                    Some(data) => {
                        tree.stats.files += 1;
                        tree.stats.bytes += data.len() as u64;
                        tree.files.push(tree.entries.len());
                        tree.entries.push(TreeEntry {
                            rel,
                            kind: TreeEntryKind::File(data),
                        });
                    }
                    None => tree.stats.skipped += 1,
                }
            } else if ft.is_symlink() {
                match std::fs::read_link(&host) {
                    Ok(target) => {
                        tree.stats.symlinks += 1;
                        tree.entries.push(TreeEntry {
                            rel,
                            kind: TreeEntryKind::Symlink(target.as_os_str().as_bytes().to_vec()),
                        });
                    }
                    Err(_) => tree.stats.skipped += 1,
                }
            } else {
                // Block and character devices, fifos, sockets.
                debug_assert!(
                    ft.is_block_device() || ft.is_char_device() || ft.is_fifo() || ft.is_socket()
                );
                tree.stats.skipped += 1;
            }
        }
        if tree.files.is_empty() {
            return Err(Error::msg(format!(
                "tree {}: no regular file to read ({} entries skipped)",
                root.display(),
                tree.stats.skipped
            )));
        }
        Ok(tree)
    }

    /// The regular files' paths relative to the root, in `files` order.
    pub fn file_paths(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.files.iter().map(|&i| self.entries[i].rel.as_slice())
    }

    /// The regular files' sizes, in `files` order.
    pub fn file_sizes(&self) -> impl Iterator<Item = u64> + '_ {
        self.files.iter().map(|&i| match &self.entries[i].kind {
            TreeEntryKind::File(data) => data.len() as u64,
            TreeEntryKind::Dir | TreeEntryKind::Symlink(_) => 0,
        })
    }
}

/// The calls a target offers to import a [`HostTree`] (see
/// [`HostTree::import`]); paths are relative to the tree's directory in
/// the target.
pub trait TreeSink {
    /// An open file in the target.
    type File;

    /// `mkdir(rel, mode)`.
    fn mkdir(&mut self, rel: &[u8], mode: u32) -> SinkResult<()>;

    /// `open(rel, O_CREAT|O_EXCL|O_WRONLY, mode)`.
    fn create(&mut self, rel: &[u8], mode: u32) -> SinkResult<Self::File>;

    /// `open(rel, O_RDONLY)`.
    fn open(&mut self, rel: &[u8]) -> SinkResult<Self::File>;

    /// `write(file, data)`: bytes written.
    fn write(&mut self, file: &Self::File, data: &[u8]) -> SinkResult<usize>;

    /// `read(file, buf)`: bytes read, 0 at the end.
    fn read(&mut self, file: &Self::File, buf: &mut [u8]) -> SinkResult<usize>;

    /// `close(file)`.
    fn close(&mut self, file: Self::File) -> SinkResult<()>;

    /// `symlink(target, rel)`.
    fn symlink(&mut self, target: &[u8], rel: &[u8]) -> SinkResult<()>;
}

/// What a [`TreeSink`] call returns: its errno (uvfs's or the kernel's),
/// boxed; [`HostTree::import`] adds the call and path.
pub type SinkResult<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

impl HostTree {
    /// Recreates the tree through `sink` (directories, files with their
    /// contents, symlinks, parents first), then reads every file back and
    /// checks it holds what the host's did. `what` names the target and
    /// directory in errors, e.g. `uvfs /tree1`.
    ///
    /// # Errors
    ///
    /// A failed call, a short write, a file that reads back different, or a
    /// signal interrupting the benchmark ([`interrupt::check`]).
    pub fn import<S: TreeSink>(&self, sink: &mut S, what: &str) -> Result<()> {
        let ctx = |call: &str, rel: &[u8]| {
            format!(
                "{what} tree import: {call}({})",
                String::from_utf8_lossy(rel)
            )
        };
        let fail = |call: &str, rel: &[u8], e: Box<dyn std::error::Error + Send + Sync>| {
            Error::msg(format!("{}: {e}", ctx(call, rel)))
        };
        let interrupted = |e: Error| Error::new(format!("{what} tree import"), e);
        for entry in &self.entries {
            interrupt::check().map_err(interrupted)?;
            let rel = entry.rel.as_slice();
            match &entry.kind {
                TreeEntryKind::Dir => {
                    sink.mkdir(rel, DIR_MODE)
                        .map_err(|e| fail("mkdir", rel, e))?;
                }
                TreeEntryKind::File(data) => {
                    let f = sink
                        .create(rel, FILE_MODE)
                        .map_err(|e| fail("open", rel, e))?;
                    let mut off = 0;
                    while off < data.len() {
                        let n = sink
                            .write(&f, &data[off..])
                            .map_err(|e| fail("write", rel, e))?;
                        if n == 0 {
                            return Err(Error::msg(ctx("write returned 0: write", rel)));
                        }
                        off += n;
                    }
                    sink.close(f).map_err(|e| fail("close", rel, e))?;
                }
                TreeEntryKind::Symlink(target) => {
                    sink.symlink(target, rel)
                        .map_err(|e| fail("symlink", rel, e))?;
                }
            }
        }
        let mut buf = vec![0u8; READ_BUF];
        for &i in &self.files {
            interrupt::check().map_err(interrupted)?;
            let entry = &self.entries[i];
            let rel = entry.rel.as_slice();
            let TreeEntryKind::File(data) = &entry.kind else {
                return Err(Error::msg(ctx("not a regular file: open", rel)));
            };
            let f = sink.open(rel).map_err(|e| fail("open", rel, e))?;
            let mut off = 0;
            loop {
                let n = sink.read(&f, &mut buf).map_err(|e| fail("read", rel, e))?;
                if n == 0 {
                    break;
                }
                if data.get(off..off + n) != Some(&buf[..n]) {
                    return Err(Error::msg(ctx(
                        "contents differ from the host's: read",
                        rel,
                    )));
                }
                off += n;
            }
            sink.close(f).map_err(|e| fail("close", rel, e))?;
            if off != data.len() {
                return Err(Error::msg(ctx("shorter than on the host: read", rel)));
            }
        }
        Ok(())
    }
}

/// The contents of the regular file at `path`, or `None` to skip it: it
/// cannot be opened or read, it is larger than [`MAX_FILE`], its read would block (`EAGAIN`), it lives on a
/// pseudo file system, or it holds more than its `st_size` (it grew, or it
/// is generated, like `/proc` files of size 0). Reads at most `st_size + 1`
/// bytes, so no file is read without bound (`/proc/self/pagemap`).
fn read_file(path: &Path) -> Option<Vec<u8>> {
    // O_NONBLOCK: a file that would block fails with EAGAIN instead of
    // hanging; O_NOFOLLOW: a symlink put there since the walk's lstat is not
    // followed.
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::NOCTTY;
    let fd = rustix::fs::open(path, flags | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || is_pseudo_fs(&fd) {
        return None;
    }
    let size = u64::try_from(st.st_size).ok()?;
    if size > MAX_FILE {
        return None;
    }
    read_at_most(std::fs::File::from(fd), size)
}

/// Largest file the tree imports (64 MiB): the tree is held in memory and copied into
/// every target, so a large (often sparse: disk images, core files) file is skipped and
/// counted rather than read whole. The workload measures path walks and small reads.
pub const MAX_FILE: u64 = 64 << 20;

/// All of `reader` if it holds at most `size` bytes, else (or on any error)
/// `None`. Reads at most `size + 1` bytes.
fn read_at_most(reader: impl std::io::Read, size: u64) -> Option<Vec<u8>> {
    let limit = size.checked_add(1)?;
    let mut data = Vec::new();
    data.try_reserve_exact(usize::try_from(limit).ok()?).ok()?;
    reader.take(limit).read_to_end(&mut data).ok()?;
    (data.len() as u64 <= size).then_some(data)
}

/// Whether `fd` is on a pseudo file system, whose files are generated on
/// read (sizes that lie, reads with side effects or without end, e.g.
/// `/proc/kcore`), by `fstatfs` magic (linux:include/uapi/linux/magic.h).
fn is_pseudo_fs(fd: &std::os::fd::OwnedFd) -> bool {
    let Ok(st) = rustix::fs::fstatfs(fd) else {
        return true;
    };
    #[allow(clippy::unnecessary_cast)] // f_type's width differs by arch.
    let magic = st.f_type as u64 & 0xffff_ffff;
    matches!(
        magic,
        0x9fa0 // proc
            | 0x6265_6572 // sysfs
            | 0x6462_6720 // debugfs
            | 0x7472_6163 // tracefs
            | 0x7363_6673 // securityfs
            | 0x0027_e0eb // cgroup
            | 0x6367_7270 // cgroup2
            | 0x6265_6570 // configfs
            | 0xcafe_4a11 // bpf
            | 0x6165_676c // pstore
            | 0xde5e_81e4 // efivarfs
    )
}

/// The names in directory `dir`, sorted in reverse (so `pop` yields them in
/// order).
fn list_dir(dir: &Path) -> std::io::Result<Vec<std::ffi::OsString>> {
    let mut names = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<std::io::Result<Vec<_>>>()?;
    names.sort_unstable_by(|a, b| b.cmp(a));
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_files_dirs_symlinks_and_skips_fifos() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/f.h"), b"hello").unwrap();
        std::fs::write(root.join("top.h"), b"xy").unwrap();
        std::os::unix::fs::symlink("a/b/f.h", root.join("link")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            root.join("fifo"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        let tree = HostTree::read(root).unwrap();
        let rels: Vec<&[u8]> = tree.entries.iter().map(|e| e.rel.as_slice()).collect();
        assert_eq!(
            rels,
            [&b"a"[..], b"a/b", b"a/b/f.h", b"link", b"top.h"].to_vec()
        );
        assert_eq!(tree.stats.files, 2);
        assert_eq!(tree.stats.dirs, 2);
        assert_eq!(tree.stats.symlinks, 1);
        assert_eq!(tree.stats.skipped, 1);
        assert_eq!(tree.stats.bytes, 7);
        assert_eq!(
            tree.file_paths().collect::<Vec<_>>(),
            [&b"a/b/f.h"[..], b"top.h"].to_vec()
        );
    }

    /// Records what an import does; `corrupt` makes reads return other bytes.
    #[derive(Default)]
    struct MemSink {
        files: std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
        log: Vec<String>,
        corrupt: bool,
    }

    impl TreeSink for MemSink {
        type File = (Vec<u8>, std::cell::Cell<usize>);

        fn mkdir(&mut self, rel: &[u8], mode: u32) -> SinkResult<()> {
            self.log
                .push(format!("mkdir {} {mode:o}", String::from_utf8_lossy(rel)));
            Ok(())
        }
        fn create(&mut self, rel: &[u8], _mode: u32) -> SinkResult<Self::File> {
            self.files.insert(rel.to_vec(), Vec::new());
            Ok((rel.to_vec(), 0.into()))
        }
        fn open(&mut self, rel: &[u8]) -> SinkResult<Self::File> {
            Ok((rel.to_vec(), 0.into()))
        }
        fn write(&mut self, file: &Self::File, data: &[u8]) -> SinkResult<usize> {
            // Short writes, to exercise the write loop.
            let n = data.len().min(3);
            self.files
                .get_mut(&file.0)
                .unwrap()
                .extend_from_slice(&data[..n]);
            Ok(n)
        }
        fn read(&mut self, file: &Self::File, buf: &mut [u8]) -> SinkResult<usize> {
            let data = &self.files[&file.0];
            let off = file.1.get();
            let n = (data.len() - off).min(buf.len());
            buf[..n].copy_from_slice(&data[off..off + n]);
            if self.corrupt && n > 0 {
                buf[0] ^= 1;
            }
            file.1.set(off + n);
            Ok(n)
        }
        fn close(&mut self, _file: Self::File) -> SinkResult<()> {
            Ok(())
        }
        fn symlink(&mut self, target: &[u8], rel: &[u8]) -> SinkResult<()> {
            let (t, r) = (
                String::from_utf8_lossy(target),
                String::from_utf8_lossy(rel),
            );
            self.log.push(format!("symlink {t} {r}"));
            Ok(())
        }
    }

    #[test]
    fn import_recreates_and_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("d")).unwrap();
        std::fs::write(root.join("d/f"), b"0123456789").unwrap();
        std::os::unix::fs::symlink("d/f", root.join("l")).unwrap();
        let tree = HostTree::read(root).unwrap();
        let mut sink = MemSink::default();
        tree.import(&mut sink, "mem").unwrap();
        assert_eq!(sink.log, ["mkdir d 755", "symlink d/f l"]);
        assert_eq!(sink.files[&b"d/f"[..]], b"0123456789");
        assert_eq!(tree.file_sizes().collect::<Vec<_>>(), [10]);

        let mut bad = MemSink {
            corrupt: true,
            ..MemSink::default()
        };
        let e = tree.import(&mut bad, "mem").unwrap_err().to_string();
        assert!(e.contains("contents differ"), "{e}");
    }

    /// Bug: `--tree /proc/self` read `/proc/self/pagemap` without bound (out
    /// of memory) and `--tree /sys/kernel` hung reading tracefs's
    /// `trace_pipe`. Cause: files read whole with blocking reads. Fix: open
    /// with O_NONBLOCK|O_NOFOLLOW, read at most `st_size + 1` bytes, skip
    /// pseudo file systems and files that hold more than `st_size`.
    #[test]
    fn pseudo_files_are_skipped_not_read_whole() {
        assert_eq!(read_at_most(&b"abcd"[..], 4).as_deref(), Some(&b"abcd"[..]));
        assert_eq!(read_at_most(&b"abc"[..], 4).as_deref(), Some(&b"abc"[..]));
        assert_eq!(read_at_most(&b"abcd"[..], 3), None, "grew past st_size");
        assert_eq!(read_at_most(&b"x"[..], 0), None, "size 0 but data");
        assert_eq!(read_at_most(&b""[..], 0), Some(Vec::new()));

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), b"data").unwrap();
        std::fs::write(dir.path().join("empty"), b"").unwrap();
        std::os::unix::fs::symlink("f", dir.path().join("l")).unwrap();
        assert_eq!(read_file(&dir.path().join("f")), Some(b"data".to_vec()));
        assert_eq!(read_file(&dir.path().join("empty")), Some(Vec::new()));
        assert_eq!(read_file(&dir.path().join("l")), None, "O_NOFOLLOW");
        assert_eq!(read_file(Path::new("/proc/self/status")), None);
        assert_eq!(read_file(Path::new("/proc/self/pagemap")), None);

        let e = HostTree::read(Path::new("/proc/self")).unwrap_err();
        assert!(e.to_string().contains("no regular file"), "{e}");
    }

    #[test]
    fn empty_tree_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(HostTree::read(dir.path()).is_err());
        assert!(HostTree::read(&dir.path().join("missing")).is_err());
    }
}

#[cfg(test)]
mod max_file_tests {
    use super::*;

    /// A sparse file past `MAX_FILE` is skipped and counted, not read whole (a fresh-user
    /// check imported a 3 GiB sparse file into both targets).
    #[test]
    fn huge_sparse_files_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("small"), b"data").unwrap();
        let big = std::fs::File::create(dir.path().join("big")).unwrap();
        big.set_len(MAX_FILE + 1).unwrap();
        let tree = HostTree::read(dir.path()).unwrap();
        assert_eq!(tree.stats.files, 1);
        assert_eq!(tree.stats.skipped, 1);
    }
}
