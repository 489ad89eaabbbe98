//! `Dir`: a `std::fs`-shaped facade over a [`Task`], confined to one directory.
//!
//! Linux analogue: none (a library API over the syscalls, after `std::fs` and cap-std's
//! `cap_std::fs::Dir`). Names and semantics follow `std::fs` where it has the call
//! (`read`, `write`, `create_dir_all`, `remove_dir_all`, `read_dir`, `metadata`, `copy`,
//! `OpenOptions`, ...) and cap-std's `Dir` where a call needs a directory handle
//! (`open_dir`, `rename(from, &to_dir, to)`, `hard_link`).
//!
//! # Example
//! ```
//! let task = uvfs::Task::init(&uvfs::tmpfs::mount(Default::default()));
//! let root = task.root_dir()?;
//! root.create_dir_all("src/bin")?;
//! root.write("src/bin/main.rs", "fn main() {}")?;
//! let walked: Vec<_> = root.walk_dir("src").map(|e| e.map(|e| e.path().to_owned())).collect::<Result<_, _>>()?;
//! assert_eq!(walked, ["src", "src/bin", "src/bin/main.rs"].map(std::path::PathBuf::from));
//! let log = task.open_file("/log", uvfs::OpenFlags::CREAT | uvfs::OpenFlags::WRONLY, 0o644)?;
//! std::thread::spawn(move || std::io::Write::write_all(&mut &log, b"an OpenFile is Send + Sync"))
//!     .join()
//!     .unwrap()?;
//! assert_eq!(root.metadata("log")?.len(), 26);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Confinement
//! A `Dir` is a descriptor of its task (`O_PATH|O_DIRECTORY`) and every path given to it is
//! resolved beneath it, as `openat2(RESOLVE_BENEATH)` resolves: an absolute path, a `..`
//! above the directory or a symlink leading out of it is `EXDEV`, and nothing outside is
//! read or changed. A call that names a final component to create, remove or rename
//! resolves the parent beneath the directory, then acts on the name in it (the `*at` call
//! with the parent's descriptor); a call that opens or inspects what a path names
//! (`open`, `metadata`, `read_dir`, `set_permissions`, `copy`) opens it beneath the
//! directory. The task's root and working directory are not used (a `Dir` on `/` is
//! confined to `/` all the same).
//!
//! # Errors
//! `std::io::Error`s whose `raw_os_error()` is the errno Linux gives for the underlying
//! call, as `std::fs`'s are; [`crate::Errno::from_io_error`] turns one back.
//!
//! # Why `&Task`
//! A `Dir` borrows its [`Task`] (descriptors are per task; a task is `!Sync`, as a Linux
//! task's descriptor table is used by its own thread or shared deliberately with
//! `clone_thread`). A thread that needs its own handle makes its own task
//! ([`Task::clone_thread`] shares the table, [`Task::fork`] copies it) and opens its own `Dir`.

use crate::io::OwnedFd;
use crate::open::{OpenHow, ResolveFlags};
use crate::readdir::parse_dirents;
use crate::task::Task;
use crate::types::*;
use crate::variant::{Uvfs, Variant};
use crate::Errno;
use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, SystemTime};

/// The buffer `read_dir` and `remove_dir_all` give `getdents64` (bytes).
const DIRENT_BUF: usize = 4096;
/// The chunk `copy` moves per `read`/`write` (bytes).
const COPY_CHUNK: usize = 64 * 1024;
/// The largest symlink target `read_link` returns (`PATH_MAX`, bytes).
const PATH_MAX: usize = 4096;

fn err(e: Errno) -> io::Error {
    e.into()
}

/// `name` without its trailing slashes (`b//` -> `b`).
fn trim_slashes(name: &[u8]) -> &[u8] {
    &name[..name.iter().rposition(|&c| c != b'/').map_or(0, |i| i + 1)]
}

/// Splits `path` into its parent (`.` if none) and its final component, trailing slashes
/// kept on the final component (`a/b/` -> (`a`, `b/`), as `mkdir("a/b/")` is valid).
/// `None` for an empty path and for a path of slashes only.
fn split_last(path: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = path.iter().rposition(|&c| c != b'/')? + 1;
    let start = path[..end]
        .iter()
        .rposition(|&c| c == b'/')
        .map_or(0, |i| i + 1);
    let parent = &path[..start];
    let parent = if parent.is_empty() { &b"."[..] } else { parent };
    Some((parent, &path[start..]))
}

/// A directory of a task, the base of every path given to it (see the module doc).
///
/// # Refcounting
/// Owns one descriptor of `task` (an `O_PATH|O_DIRECTORY` open of the directory), closed on
/// drop; the directory stays reachable through it even if renamed or removed.
#[derive(Debug)]
pub struct Dir<'t, V: Variant = Uvfs> {
    fd: OwnedFd<'t, V>,
}

impl<V: Variant> Task<V> {
    /// A [`Dir`] on the task's root directory (as `std::fs` on `/`, confined to it).
    ///
    /// # Errors
    /// `EMFILE` if the descriptor table is full.
    pub fn root_dir(&self) -> io::Result<Dir<'_, V>> {
        self.open_dir("/")
    }

    /// A [`Dir`] on the task's working directory.
    ///
    /// # Errors
    /// `EMFILE` if the descriptor table is full; `ENOENT` if the directory was removed.
    pub fn cwd_dir(&self) -> io::Result<Dir<'_, V>> {
        self.open_dir(".")
    }

    /// A [`Dir`] on the directory `path` names, resolved as `open(2)` resolves it (from the
    /// task's root or working directory, symlinks followed, not confined).
    ///
    /// # Errors
    /// As [`Task::openat`] with `O_PATH|O_DIRECTORY`: `ENOENT`, `ENOTDIR` (not a directory),
    /// `EACCES` (a component not searchable), `ELOOP`, `ENAMETOOLONG`, `EMFILE`.
    pub fn open_dir(&self, path: impl AsPath) -> io::Result<Dir<'_, V>> {
        let fd = self.open(
            path,
            OpenFlags::PATH | OpenFlags::DIRECTORY | OpenFlags::CLOEXEC,
            0,
        )?;
        Ok(Dir {
            fd: OwnedFd::new(self, fd),
        })
    }
}

impl<'t, V: Variant> Dir<'t, V> {
    /// The task whose descriptor this is.
    pub fn task(&self) -> &'t Task<V> {
        self.fd.task()
    }

    /// The directory's descriptor (owned by the `Dir`; valid while it lives).
    pub fn fd(&self) -> Fd {
        self.fd.fd()
    }

    /// The directory's descriptor, the caller's to own from now on (hosttree.rs holds it
    /// as the root of a copy).
    pub(crate) fn into_owned_fd(self) -> OwnedFd<'t, V> {
        self.fd
    }

    /// `openat2(self, path, how)` with `RESOLVE_BENEATH` added: the one open every call
    /// makes, so that none escapes the directory.
    fn open_beneath(&self, path: &[u8], flags: OpenFlags, mode: u32) -> io::Result<Fd> {
        // openat2 refuses a mode without O_CREAT (EINVAL).
        let mode = if flags.contains(OpenFlags::CREAT) {
            mode
        } else {
            0
        };
        let how = OpenHow::new(flags | OpenFlags::CLOEXEC, mode, ResolveFlags::BENEATH);
        Ok(self.task().openat2(self.fd(), path, &how)?)
    }

    /// The parent of `path`'s final component, opened beneath this directory, and that
    /// component (`EEXIST`-free: nothing is created). `ENOENT` for an empty path, as Linux.
    fn parent_of<'p>(&self, path: &'p [u8]) -> io::Result<(OwnedFd<'t, V>, &'p [u8])> {
        let Some((parent, last)) = split_last(path) else {
            // An empty path is ENOENT; "/" (slashes only) is absolute: outside the Dir.
            return Err(err(if path.is_empty() {
                Errno::ENOENT
            } else {
                Errno::EXDEV
            }));
        };
        if path[0] == b'/' {
            return Err(err(Errno::EXDEV));
        }
        // The `*at` call on the final name would resolve a `..` above this directory, and
        // follow a symlink named with a trailing slash, without RESOLVE_BENEATH: check that
        // such a name stays beneath first (a missing one leads nowhere).
        let bare = trim_slashes(last);
        if bare == b".." || bare.len() != last.len() {
            match self.open_beneath(path, OpenFlags::PATH, 0) {
                Ok(fd) => drop(OwnedFd::new(self.task(), fd)),
                Err(e) if e.raw_os_error() == Some(Errno::ENOENT.raw()) => {}
                Err(e) => return Err(e),
            }
        }
        let fd = self.open_beneath(parent, OpenFlags::PATH | OpenFlags::DIRECTORY, 0)?;
        Ok((OwnedFd::new(self.task(), fd), last))
    }

    /// The parent of the relative path `rel` (no `..`), opened beneath this directory
    /// without following any symlink (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`), and the
    /// final component: for copies that create or read a tree beneath the `Dir` by name
    /// (hosttree.rs), so that a symlink in the tree (an archive's, or one made meanwhile)
    /// can never redirect them. `ELOOP` if a component is a symlink. (Tar only: the host
    /// import and export hold a descriptor per level instead.)
    #[cfg(feature = "tar")]
    pub(crate) fn parent_nofollow<'p>(
        &self,
        rel: &'p [u8],
    ) -> io::Result<(OwnedFd<'t, V>, &'p [u8])> {
        let (parent, last) = split_last(rel).ok_or_else(|| err(Errno::ENOENT))?;
        let how = OpenHow::new(
            OpenFlags::PATH | OpenFlags::DIRECTORY | OpenFlags::CLOEXEC,
            0,
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
        );
        let fd = self.task().openat2(self.fd(), parent, &how)?;
        Ok((OwnedFd::new(self.task(), fd), last))
    }

    /// Opens `path` for reading (`std::fs::File::open`).
    ///
    /// # Errors
    /// `ENOENT`, `EACCES`, `EISDIR` never (a directory opens read-only), `EXDEV` (outside
    /// the directory), `ELOOP`, `ENAMETOOLONG`, `EMFILE`; as [`Task::openat2`].
    pub fn open(&self, path: impl AsRef<Path>) -> io::Result<OwnedFd<'t, V>> {
        self.open_with(path, OpenOptions::new().read(true))
    }

    /// Opens `path` with `options` (`std::fs::OpenOptions::open`).
    ///
    /// # Errors
    /// `InvalidInput` without an errno, as std's (no access mode; `truncate` without
    /// `write` or with `append`; `create`/`create_new` without `write`/`append`), else as [`Task::openat2`]: `EEXIST` (`create_new` on an existing
    /// name), `ENOENT`, `EACCES`, `EISDIR` (a directory for writing), `EXDEV`, `ELOOP`.
    pub fn open_with(
        &self,
        path: impl AsRef<Path>,
        options: &OpenOptions,
    ) -> io::Result<OwnedFd<'t, V>> {
        let flags = options.flags()?;
        let fd = self.open_beneath(path.as_ref().as_os_str().as_bytes(), flags, options.mode)?;
        Ok(OwnedFd::new(self.task(), fd))
    }

    /// Opens `path` for writing, created (mode `0o666` less the umask) or truncated
    /// (`std::fs::File::create`).
    ///
    /// # Errors
    /// As [`open_with`](Self::open_with).
    pub fn create(&self, path: impl AsRef<Path>) -> io::Result<OwnedFd<'t, V>> {
        self.open_with(
            path,
            OpenOptions::new().write(true).create(true).truncate(true),
        )
    }

    /// Opens `path` with `options` as an [`OpenFile`](crate::OpenFile): an owned,
    /// `Send + Sync` handle that keeps no descriptor (`open_with`, then
    /// [`OwnedFd::into_file`]).
    ///
    /// # Errors
    /// As [`open_with`](Self::open_with).
    pub fn open_file(
        &self,
        path: impl AsRef<Path>,
        options: &OpenOptions,
    ) -> io::Result<crate::OpenFile<V>> {
        Ok(self.open_with(path, options)?.into_file()?)
    }

    /// A [`Dir`] on the directory `path` names beneath this one (cap-std `Dir::open_dir`).
    ///
    /// # Errors
    /// `ENOTDIR` (not a directory), `ENOENT`, `EACCES`, `EXDEV`, `ELOOP`, `EMFILE`.
    pub fn open_dir(&self, path: impl AsRef<Path>) -> io::Result<Dir<'t, V>> {
        let fd = self.open_beneath(
            path.as_ref().as_os_str().as_bytes(),
            OpenFlags::PATH | OpenFlags::DIRECTORY,
            0,
        )?;
        Ok(Dir {
            fd: OwnedFd::new(self.task(), fd),
        })
    }

    /// The whole contents of the file `path` names (`std::fs::read`).
    ///
    /// # Errors
    /// As [`open`](Self::open); `EISDIR` (a directory); read errors.
    pub fn read(&self, path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
        let mut f = self.open(path)?;
        let mut out = Vec::new();
        f.read_to_end(&mut out)?;
        Ok(out)
    }

    /// The whole contents of the file `path` names, as UTF-8 (`std::fs::read_to_string`).
    ///
    /// # Errors
    /// As [`read`](Self::read); `InvalidData` (no errno) if it is not UTF-8.
    pub fn read_to_string(&self, path: impl AsRef<Path>) -> io::Result<String> {
        String::from_utf8(self.read(path)?)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// Writes `contents` as the whole file `path` names, created or truncated
    /// (`std::fs::write`).
    ///
    /// # Errors
    /// As [`create`](Self::create); write errors (`ENOSPC`, `EFBIG`, `EDQUOT`...): then the
    /// file holds what was written before the error.
    pub fn write(&self, path: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> io::Result<()> {
        self.create(path)?.write_all(contents.as_ref())
    }

    /// Creates the directory `path` (mode `0o777` less the umask; `std::fs::create_dir`).
    ///
    /// # Errors
    /// `EEXIST` (the name exists, symlinks included), `ENOENT` (a missing parent), `EACCES`,
    /// `ENOSPC`, `EMLINK`, `EXDEV` (outside), as [`Task::mkdirat`].
    pub fn create_dir(&self, path: impl AsRef<Path>) -> io::Result<()> {
        self.create_dir_mode(path.as_ref().as_os_str().as_bytes(), 0o777)
    }

    fn create_dir_mode(&self, path: &[u8], mode: u32) -> io::Result<()> {
        let (p, last) = self.parent_of(path)?;
        Ok(self.task().mkdirat(p.fd(), last, mode)?)
    }

    /// Creates `path` and every missing ancestor; an existing directory (or a symlink to
    /// one) is fine (`std::fs::create_dir_all`, `DirBuilder::recursive`).
    ///
    /// # Errors
    /// `EEXIST` if a component exists and is not a directory; else as
    /// [`create_dir`](Self::create_dir).
    pub fn create_dir_all(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let path = path.as_ref().as_os_str().as_bytes();
        if path.is_empty() {
            // std: "" is the current directory, which exists.
            return Ok(());
        }
        if path[0] == b'/' {
            return Err(err(Errno::EXDEV));
        }
        // Each prefix ending before a '/' (and the whole path), shortest first; the
        // missing ones are created from the first that does not exist.
        let mut ends: Vec<usize> = path
            .iter()
            .enumerate()
            .filter(|&(i, &c)| c == b'/' && i > 0 && path[i - 1] != b'/')
            .map(|(i, _)| i)
            .collect();
        if path.last() != Some(&b'/') {
            ends.push(path.len());
        }
        // The longest prefix that is already a directory, searched from the end (std's
        // order: try the whole path first).
        let mut first_missing = 0;
        for (k, &e) in ends.iter().enumerate().rev() {
            match self.metadata_bytes(&path[..e], true) {
                Ok(m) if m.is_dir() => {
                    first_missing = k + 1;
                    break;
                }
                Ok(_) => return Err(err(Errno::EEXIST)),
                Err(e) if e.raw_os_error() == Some(Errno::ENOENT.raw()) => {}
                Err(e) => return Err(e),
            }
        }
        for &e in &ends[first_missing..] {
            match self.create_dir_mode(&path[..e], 0o777) {
                Ok(()) => {}
                // Created meanwhile by someone else: fine if it is a directory.
                Err(x) if x.raw_os_error() == Some(Errno::EEXIST.raw()) => {
                    // A directory (or a symlink to one) is fine; anything else, a dangling
                    // symlink included, is std's EEXIST.
                    match self.metadata_bytes(&path[..e], true) {
                        Ok(m) if m.is_dir() => {}
                        _ => return Err(x),
                    }
                }
                Err(x) => return Err(x),
            }
        }
        Ok(())
    }

    /// Removes the file (or symlink, or other non-directory) `path` names
    /// (`std::fs::remove_file`).
    ///
    /// # Errors
    /// `EISDIR` (a directory), `ENOENT`, `EACCES`/`EPERM` (sticky directory), `EBUSY`,
    /// `EXDEV` (outside), as [`Task::unlinkat`].
    pub fn remove_file(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let (p, last) = self.parent_of(path.as_ref().as_os_str().as_bytes())?;
        Ok(self.task().unlinkat(p.fd(), last, AtFlags::empty())?)
    }

    /// Removes the empty directory `path` names (`std::fs::remove_dir`).
    ///
    /// # Errors
    /// `ENOTEMPTY`, `ENOTDIR`, `ENOENT`, `EBUSY` (a mount point), `EINVAL` (a final `.`),
    /// `EXDEV` (outside), as [`Task::unlinkat`] with `AT_REMOVEDIR`.
    pub fn remove_dir(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let (p, last) = self.parent_of(path.as_ref().as_os_str().as_bytes())?;
        Ok(self.task().unlinkat(p.fd(), last, AtFlags::REMOVEDIR)?)
    }

    /// Removes the directory `path` names and everything in it, depth first, without
    /// following symlinks (a symlink at `path` is itself removed); entries that vanish
    /// meanwhile are skipped (`std::fs::remove_dir_all`). Unlike std, a final `.` or `..`
    /// is refused before anything is removed. Holds one descriptor per level
    /// being emptied, as std does (`EMFILE` past the descriptor limit).
    ///
    /// # Errors
    /// `ENOTDIR` (a file: left alone, as std), `EINVAL` (a final `.`), `ENOTEMPTY` (a final
    /// `..`), `EXDEV` (outside); then the first error of an `unlinkat`, `openat` or
    /// `getdents64` other than `ENOENT`: what was removed before it stays removed (as std).
    pub fn remove_dir_all(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let path = path.as_ref().as_os_str().as_bytes();
        let (p, last) = self.parent_of(path)?;
        let t = self.task();
        // Refused before anything is removed (std would empty the directory first and then
        // fail): rmdir of `.` is EINVAL and of `..` ENOTEMPTY (Linux `do_rmdir`).
        // (`..` above the Dir is EXDEV first, as every path out of it.)
        let bare = trim_slashes(last);
        if bare == b"." || bare == b".." {
            drop(OwnedFd::new(
                t,
                self.open_beneath(path, OpenFlags::PATH, 0)?,
            ));
            return Err(err(if bare == b"." {
                Errno::EINVAL
            } else {
                Errno::ENOTEMPTY
            }));
        }
        // The bare name from here on: with a trailing slash, fstatat and openat would follow
        // a symlink, to wherever it leads (`rmdir("link/")` is ENOTDIR on Linux).
        let trailing = bare.len() != last.len();
        let last = bare;
        let st = t.fstatat(p.fd(), last, AtFlags::SYMLINK_NOFOLLOW)?;
        if st.is_symlink() {
            if trailing {
                return Err(err(Errno::ENOTDIR));
            }
            return Ok(t.unlinkat(p.fd(), last, AtFlags::empty())?);
        }
        if !st.is_dir() {
            return Err(err(Errno::ENOTDIR));
        }
        let open = |dir: Fd, name: &[u8]| -> io::Result<OwnedFd<'t, V>> {
            let flags =
                OpenFlags::RDONLY | OpenFlags::DIRECTORY | OpenFlags::NOFOLLOW | OpenFlags::CLOEXEC;
            Ok(OwnedFd::new(t, t.openat(dir, name, flags, 0)?))
        };
        // An explicit stack (no recursion: a deep tree must not overflow the thread's
        // stack): each level being emptied, with its name in the level above.
        let mut stack: Vec<(OwnedFd<'t, V>, Vec<u8>)> = vec![(open(p.fd(), last)?, last.to_vec())];
        let mut buf = vec![0u8; DIRENT_BUF];
        while let Some((dir, _)) = stack.last() {
            let dfd = dir.fd();
            let n = t.getdents64(dfd, &mut buf)?;
            if n == 0 {
                // Emptied: remove it from the level above.
                let (dir, name) = stack.pop().expect("stack is not empty");
                drop(dir);
                let above = stack.last().map_or(p.fd(), |(d, _)| d.fd());
                match t.unlinkat(above, &name[..], AtFlags::REMOVEDIR) {
                    Err(Errno::ENOENT) => {}
                    r => r?,
                }
                // The level above left its listing at a subdirectory, past entries of the
                // same buffer not yet removed: list it again from the start (what is
                // removed is not listed again).
                if let Some((d, _)) = stack.last() {
                    t.lseek(d.fd(), 0, SEEK_SET)?;
                }
                continue;
            }
            let mut descend = None;
            for e in parse_dirents(&buf[..n]) {
                if e.name == b"." || e.name == b".." {
                    continue;
                }
                // DT_UNKNOWN (a file system that does not fill d_type): ask.
                let is_dir = if e.d_type == 0 {
                    match t.fstatat(dfd, &e.name[..], AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(s) => s.is_dir(),
                        Err(Errno::ENOENT) => continue,
                        Err(x) => return Err(err(x)),
                    }
                } else {
                    u32::from(e.d_type) << 12 == S_IFDIR
                };
                if is_dir {
                    descend = Some(e.name);
                    break;
                }
                match t.unlinkat(dfd, &e.name[..], AtFlags::empty()) {
                    Err(Errno::ENOENT) => {}
                    r => r?,
                }
            }
            if let Some(name) = descend {
                match open(dfd, &name) {
                    Ok(fd) => stack.push((fd, name)),
                    // Removed meanwhile: list this level again.
                    Err(x) if x.raw_os_error() == Some(Errno::ENOENT.raw()) => {
                        t.lseek(dfd, 0, SEEK_SET)?;
                    }
                    Err(x) => return Err(x),
                }
            }
        }
        Ok(())
    }

    /// Renames `from` (beneath this directory) to `to` beneath `to_dir`, replacing a
    /// non-directory or an empty directory there (`std::fs::rename`; cap-std
    /// `Dir::rename`).
    ///
    /// # Errors
    /// `EBADF` if `to_dir` belongs to another task; else as [`Task::renameat2`]: `ENOENT`,
    /// `EISDIR`/`ENOTDIR` (kinds differ), `ENOTEMPTY`, `EINVAL` (into its own subtree),
    /// `EBUSY`, `EXDEV` (outside, or across mounts), `EACCES`/`EPERM`.
    pub fn rename(
        &self,
        from: impl AsRef<Path>,
        to_dir: &Dir<'t, V>,
        to: impl AsRef<Path>,
    ) -> io::Result<()> {
        self.same_task(to_dir)?;
        let (pf, lf) = self.parent_of(from.as_ref().as_os_str().as_bytes())?;
        let (pt, lt) = to_dir.parent_of(to.as_ref().as_os_str().as_bytes())?;
        Ok(self
            .task()
            .renameat2(pf.fd(), lf, pt.fd(), lt, RenameFlags::empty())?)
    }

    /// Makes `dst` beneath `dst_dir` a new name of the file `src` names (not following a
    /// final symlink: the link gets the new name; `std::fs::hard_link`).
    ///
    /// # Errors
    /// `EBADF` if `dst_dir` belongs to another task; else as [`Task::linkat`]: `EEXIST`,
    /// `ENOENT`, `EPERM` (a directory), `EMLINK`, `EXDEV` (outside, or across mounts).
    pub fn hard_link(
        &self,
        src: impl AsRef<Path>,
        dst_dir: &Dir<'t, V>,
        dst: impl AsRef<Path>,
    ) -> io::Result<()> {
        self.same_task(dst_dir)?;
        let (ps, ls) = self.parent_of(src.as_ref().as_os_str().as_bytes())?;
        let (pd, ld) = dst_dir.parent_of(dst.as_ref().as_os_str().as_bytes())?;
        Ok(self
            .task()
            .linkat(ps.fd(), ls, pd.fd(), ld, AtFlags::empty())?)
    }

    fn same_task(&self, other: &Dir<'t, V>) -> io::Result<()> {
        if std::ptr::eq(self.task(), other.task()) {
            Ok(())
        } else {
            // Its descriptor means nothing in this task's table.
            Err(err(Errno::EBADF))
        }
    }

    /// Creates the symlink `link` (beneath this directory) holding `original`, which is
    /// stored as given and resolved only when followed (then beneath this directory too;
    /// `std::os::unix::fs::symlink`, cap-std `Dir::symlink`).
    ///
    /// # Errors
    /// `EEXIST`, `ENOENT` (`original` empty, or a missing parent), `ENAMETOOLONG`,
    /// `EACCES`, `ENOSPC`, `EXDEV` (`link` outside), as [`Task::symlinkat`].
    pub fn symlink(&self, original: impl AsRef<Path>, link: impl AsRef<Path>) -> io::Result<()> {
        let (p, last) = self.parent_of(link.as_ref().as_os_str().as_bytes())?;
        Ok(self
            .task()
            .symlinkat(original.as_ref().as_os_str().as_bytes(), p.fd(), last)?)
    }

    /// The target of the symlink `path` names (`std::fs::read_link`).
    ///
    /// # Errors
    /// `EINVAL` (not a symlink), `ENOENT`, `EACCES`, `EXDEV` (outside), as
    /// [`Task::readlinkat`].
    pub fn read_link(&self, path: impl AsRef<Path>) -> io::Result<PathBuf> {
        let (p, last) = self.parent_of(path.as_ref().as_os_str().as_bytes())?;
        let mut buf = vec![0u8; PATH_MAX];
        let n = self.task().readlinkat(p.fd(), last, &mut buf)?;
        buf.truncate(n);
        Ok(PathBuf::from(OsString::from_vec(buf)))
    }

    /// Copies the contents and permission bits of the regular file `from` to `to` beneath
    /// `to_dir`, created or truncated; returns the bytes copied (`std::fs::copy`).
    ///
    /// # Errors
    /// `InvalidInput` without an errno, as std's, if `from` is not a regular file (after
    /// symlinks), and if `to` is `from` itself (another name of it, or a symlink to it:
    /// refused before anything is truncated, where std would empty the file); else as
    /// [`open`](Self::open) and [`create`](Self::create), read and write errors (then `to`
    /// holds what was copied before the error), `EBADF` if `to_dir` belongs to another task.
    pub fn copy(
        &self,
        from: impl AsRef<Path>,
        to_dir: &Dir<'t, V>,
        to: impl AsRef<Path>,
    ) -> io::Result<u64> {
        self.same_task(to_dir)?;
        let mut src = self.open(from)?;
        let st = src.stat()?;
        if !st.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the source path is neither a regular file nor a symlink to a regular file",
            ));
        }
        let perm = st.st_mode & 0o7777;
        // Opened without O_TRUNC, then truncated once it is known not to be the source
        // (std would truncate first: a copy onto itself would lose the data).
        let dst = to_dir.open_with(to, OpenOptions::new().write(true).create(true).mode(perm))?;
        let dst_st = dst.stat()?;
        if (dst_st.st_dev, dst_st.st_ino) == (st.st_dev, st.st_ino) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the source and the destination are the same file",
            ));
        }
        let t = self.task();
        if dst_st.is_file() {
            t.ftruncate(dst.fd(), 0)?;
        }
        let mut buf = vec![0u8; COPY_CHUNK];
        let mut total = 0u64;
        loop {
            let n = src.read(&mut buf)?;
            if n == 0 {
                break;
            }
            let mut w = &buf[..n];
            while !w.is_empty() {
                let k = t.write(dst.fd(), w)?;
                if k == 0 {
                    return Err(io::ErrorKind::WriteZero.into());
                }
                w = &w[k..];
            }
            total += n as u64;
        }
        // std sets the source's permissions on a regular copy (the umask applied at
        // creation).
        if dst_st.is_file() {
            t.fchmod(dst.fd(), perm)?;
        }
        Ok(total)
    }

    /// A snapshot of this directory's subtree: a new, unattached tmpfs mount whose root
    /// is a copy of this directory, its files' pages shared copy-on-write with the
    /// source until either side writes (cost per inode and page, not per byte). What is
    /// kept and how consistent it is: [`tmpfs::snapshot`](crate::tmpfs::snapshot), which
    /// does the same for a whole mount. Give the result to [`Task::init`] for a task of its
    /// own, or mount it in a namespace.
    ///
    /// # Errors
    /// `EOPNOTSUPP` when the directory is not on a tmpfs (a hostfs bind: use
    /// [`Dir::import_host`]); `ENOENT` when it was removed.
    ///
    /// # Example
    /// ```
    /// # use uvfs::{tmpfs, Task};
    /// let t = Task::init(&tmpfs::mount(Default::default()));
    /// let root = t.root_dir()?;
    /// root.create_dir_all("fixture/src")?;
    /// root.write("fixture/src/main.rs", "fn main() {}\n")?;
    /// let copy = root.open_dir("fixture")?.snapshot()?;
    /// let test = Task::init(&copy);
    /// test.root_dir()?.remove_file("src/main.rs")?;
    /// assert!(root.try_exists("fixture/src/main.rs")?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn snapshot(&self) -> io::Result<std::sync::Arc<crate::Mount>> {
        let f = self.task().files().fget(self.fd().0)?;
        Ok(crate::fs::tmpfs::snapshot_at(f.mount(), f.dentry())?)
    }

    fn metadata_bytes(&self, path: &[u8], follow: bool) -> io::Result<Metadata> {
        let mut flags = OpenFlags::PATH;
        if !follow {
            flags |= OpenFlags::NOFOLLOW;
        }
        // An empty path is ENOENT (openat2 without AT_EMPTY_PATH), as std's metadata("").
        let fd = OwnedFd::new(self.task(), self.open_beneath(path, flags, 0)?);
        let st = fd.stat()?;
        let btime = btime(self.task(), fd.fd(), b"", AtFlags::EMPTY_PATH, st.st_ino);
        Ok(Metadata { st, btime })
    }

    /// The attributes of what `path` names, symlinks followed (`std::fs::metadata`).
    ///
    /// # Errors
    /// `ENOENT`, `ENOTDIR`, `EACCES`, `ELOOP`, `EXDEV` (outside), as [`Task::openat2`].
    pub fn metadata(&self, path: impl AsRef<Path>) -> io::Result<Metadata> {
        self.metadata_bytes(path.as_ref().as_os_str().as_bytes(), true)
    }

    /// The attributes of what `path` names, a final symlink not followed
    /// (`std::fs::symlink_metadata`).
    ///
    /// # Errors
    /// As [`metadata`](Self::metadata).
    pub fn symlink_metadata(&self, path: impl AsRef<Path>) -> io::Result<Metadata> {
        self.metadata_bytes(path.as_ref().as_os_str().as_bytes(), false)
    }

    /// The attributes of this directory itself.
    ///
    /// # Errors
    /// None in practice (`EBADF` cannot happen while the `Dir` lives).
    pub fn dir_metadata(&self) -> io::Result<Metadata> {
        let st = self.fd.stat()?;
        let btime = btime(self.task(), self.fd(), b"", AtFlags::EMPTY_PATH, st.st_ino);
        Ok(Metadata { st, btime })
    }

    /// Whether `path` names something (symlinks followed): `Ok(false)` for `ENOENT`, the
    /// error otherwise (`std::fs::exists`).
    ///
    /// # Errors
    /// As [`metadata`](Self::metadata), except `ENOENT`.
    pub fn try_exists(&self, path: impl AsRef<Path>) -> io::Result<bool> {
        match self.metadata(path) {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(Errno::ENOENT.raw()) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Sets the permission bits of what `path` names, symlinks followed
    /// (`std::fs::set_permissions`).
    ///
    /// # Errors
    /// `EPERM` (neither owner nor root), `EROFS`, `ENOENT`, `EXDEV` (outside), as
    /// [`Task::fchmodat`].
    pub fn set_permissions(&self, path: impl AsRef<Path>, perm: Permissions) -> io::Result<()> {
        let fd = OwnedFd::new(
            self.task(),
            self.open_beneath(path.as_ref().as_os_str().as_bytes(), OpenFlags::PATH, 0)?,
        );
        Ok(self
            .task()
            .fchmodat(fd.fd(), "", perm.mode, AtFlags::EMPTY_PATH)?)
    }

    /// The entries of the directory `path` names, without `.` and `..`, in the file
    /// system's order (`std::fs::read_dir`). Each entry's [`DirEntry::path`] is `path`
    /// joined with its name.
    ///
    /// # Errors
    /// `ENOTDIR`, `ENOENT`, `EACCES` (not readable), `EXDEV` (outside), `EMFILE`; the
    /// iterator yields `getdents64` errors (`ENOENT` once the directory is removed).
    pub fn read_dir(&self, path: impl AsRef<Path>) -> io::Result<ReadDir<'t, V>> {
        self.read_dir_flags(path.as_ref(), OpenFlags::empty())
    }

    /// [`read_dir`](Self::read_dir) with `extra` open flags (the walk adds `O_NOFOLLOW`).
    fn read_dir_flags(&self, path: &Path, extra: OpenFlags) -> io::Result<ReadDir<'t, V>> {
        let fd = self.open_beneath(
            path.as_os_str().as_bytes(),
            OpenFlags::RDONLY | OpenFlags::DIRECTORY | extra,
            0,
        )?;
        Ok(ReadDir {
            dir: Rc::new(OwnedFd::new(self.task(), fd)),
            base: path.to_path_buf(),
            buf: vec![0u8; DIRENT_BUF],
            pending: Vec::new().into_iter(),
            done: false,
        })
    }

    /// The entries of this directory (cap-std `Dir::entries`); as
    /// [`read_dir(".")`](Self::read_dir).
    ///
    /// # Errors
    /// As [`read_dir`](Self::read_dir).
    pub fn entries(&self) -> io::Result<ReadDir<'t, V>> {
        self.read_dir(".")
    }

    /// A recursive, depth-first walk of the tree at `path` (walkdir's `WalkDir::new`):
    /// `path` itself first (depth 0), then each directory's entries, a directory before
    /// its contents, symlinks not followed. See [`WalkDir`] for the options.
    pub fn walk_dir(&self, path: impl AsRef<Path>) -> WalkDir<'_, 't, V> {
        WalkDir {
            dir: self,
            root: path.as_ref().to_path_buf(),
            max_depth: usize::MAX,
            sort: false,
            stack: Vec::new(),
            started: false,
            pending: None,
        }
    }
}

/// Options for [`Dir::open_with`] (`std::fs::OpenOptions`, with
/// `std::os::unix::fs::OpenOptionsExt::mode`).
#[derive(Clone, Debug)]
pub struct OpenOptions {
    read: bool,
    write: bool,
    append: bool,
    truncate: bool,
    create: bool,
    create_new: bool,
    mode: u32,
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl OpenOptions {
    /// No access, nothing created, mode `0o666` (std's defaults).
    pub fn new() -> OpenOptions {
        OpenOptions {
            read: false,
            write: false,
            append: false,
            truncate: false,
            create: false,
            create_new: false,
            mode: 0o666,
        }
    }
    /// Open for reading.
    pub fn read(&mut self, on: bool) -> &mut Self {
        self.read = on;
        self
    }
    /// Open for writing.
    pub fn write(&mut self, on: bool) -> &mut Self {
        self.write = on;
        self
    }
    /// Open for appending (`O_APPEND`; implies writing).
    pub fn append(&mut self, on: bool) -> &mut Self {
        self.append = on;
        self
    }
    /// Truncate to 0 bytes (`O_TRUNC`; needs writing).
    pub fn truncate(&mut self, on: bool) -> &mut Self {
        self.truncate = on;
        self
    }
    /// Create if missing (`O_CREAT`; needs writing or appending).
    pub fn create(&mut self, on: bool) -> &mut Self {
        self.create = on;
        self
    }
    /// Create, failing with `EEXIST` if the name exists (`O_CREAT|O_EXCL`; a symlink is
    /// not followed).
    pub fn create_new(&mut self, on: bool) -> &mut Self {
        self.create_new = on;
        self
    }
    /// The permission bits of a created file, before the umask (`OpenOptionsExt::mode`).
    pub fn mode(&mut self, mode: u32) -> &mut Self {
        self.mode = mode;
        self
    }

    /// The `O_*` flags, with std's validation (`InvalidInput`, no errno, as std's).
    fn flags(&self) -> io::Result<OpenFlags> {
        let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, what.to_owned());
        let acc = match (self.read, self.write, self.append) {
            (true, false, false) => OpenFlags::RDONLY,
            (false, true, false) => OpenFlags::WRONLY,
            (true, true, false) => OpenFlags::RDWR,
            (false, _, true) => OpenFlags::WRONLY | OpenFlags::APPEND,
            (true, _, true) => OpenFlags::RDWR | OpenFlags::APPEND,
            (false, false, false) => return Err(invalid("no access mode (read, write or append)")),
        };
        let writing = self.write || self.append;
        let mut f = acc;
        // std: truncate without write, or with append, is invalid, unless create_new makes
        // it moot (a new file is empty).
        if self.truncate && !self.create_new {
            if !self.write || self.append {
                return Err(invalid("truncate needs write and excludes append"));
            }
            f |= OpenFlags::TRUNC;
        }
        if self.create_new {
            if !writing {
                return Err(invalid("create_new needs write or append"));
            }
            f |= OpenFlags::CREAT | OpenFlags::EXCL;
        } else if self.create {
            if !writing {
                return Err(invalid("create needs write or append"));
            }
            f |= OpenFlags::CREAT;
        }
        Ok(f)
    }
}

/// The type of a file (`std::fs::FileType`, with `std::os::unix::fs::FileTypeExt`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileType {
    /// `S_IFMT` bits of the mode.
    fmt: u32,
}

impl FileType {
    fn from_mode(mode: u32) -> FileType {
        FileType { fmt: mode & S_IFMT }
    }
    /// A directory.
    pub fn is_dir(&self) -> bool {
        self.fmt == S_IFDIR
    }
    /// A regular file.
    pub fn is_file(&self) -> bool {
        self.fmt == S_IFREG
    }
    /// A symlink.
    pub fn is_symlink(&self) -> bool {
        self.fmt == S_IFLNK
    }
    /// A FIFO.
    pub fn is_fifo(&self) -> bool {
        self.fmt == S_IFIFO
    }
    /// A socket.
    pub fn is_socket(&self) -> bool {
        self.fmt == S_IFSOCK
    }
    /// A character device.
    pub fn is_char_device(&self) -> bool {
        self.fmt == S_IFCHR
    }
    /// A block device.
    pub fn is_block_device(&self) -> bool {
        self.fmt == S_IFBLK
    }
}

/// Permission bits (`std::fs::Permissions`, with `PermissionsExt`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Permissions {
    /// `0o7777` bits.
    mode: u32,
}

impl Permissions {
    /// From mode bits (the low 12 are kept; `PermissionsExt::from_mode`).
    pub fn from_mode(mode: u32) -> Permissions {
        Permissions {
            mode: mode & 0o7777,
        }
    }
    /// The mode bits (`PermissionsExt::mode`).
    pub fn mode(&self) -> u32 {
        self.mode
    }
    /// No write bit set for anyone (std's definition on Unix).
    pub fn readonly(&self) -> bool {
        self.mode & 0o222 == 0
    }
    /// Clears every write bit, or sets all three (std's definition on Unix).
    pub fn set_readonly(&mut self, readonly: bool) {
        if readonly {
            self.mode &= !0o222;
        } else {
            self.mode |= 0o222;
        }
    }
}

/// A file's attributes (`std::fs::Metadata`, with `MetadataExt`'s fields).
#[derive(Clone, Debug)]
pub struct Metadata {
    st: Stat,
    /// The creation time, when the file system has one (`statx`'s `STATX_BTIME`).
    btime: Option<Timespec>,
}

/// The creation time of what `dirfd` + `path` (with `flags`) names, if its file system
/// reports one: a `statx` asking for `STATX_BTIME` alone (which marks nothing queried).
/// `ino` is the inode the caller's `stat` saw: a name replaced between the two calls gives
/// `None` rather than another file's time.
fn btime<V: Variant>(
    t: &Task<V>,
    dirfd: Fd,
    path: &[u8],
    flags: AtFlags,
    ino: u64,
) -> Option<Timespec> {
    let x = t.statx(dirfd, path, flags, crate::stat::STATX_BTIME).ok()?;
    (x.stx_mask & crate::stat::STATX_BTIME != 0 && x.stx_ino == ino).then_some(Timespec {
        tv_sec: x.stx_btime.tv_sec,
        tv_nsec: x.stx_btime.tv_nsec as i64,
    })
}

fn system_time(t: Timespec) -> SystemTime {
    let ns = Duration::from_nanos(t.tv_nsec.clamp(0, 999_999_999) as u64);
    if t.tv_sec >= 0 {
        SystemTime::UNIX_EPOCH + Duration::from_secs(t.tv_sec as u64) + ns
    } else {
        SystemTime::UNIX_EPOCH - Duration::from_secs(t.tv_sec.unsigned_abs()) + ns
    }
}

impl Metadata {
    /// The file's type.
    pub fn file_type(&self) -> FileType {
        FileType::from_mode(self.st.st_mode)
    }
    /// A directory.
    pub fn is_dir(&self) -> bool {
        self.st.is_dir()
    }
    /// A regular file.
    pub fn is_file(&self) -> bool {
        self.st.is_file()
    }
    /// A symlink (only from [`Dir::symlink_metadata`]).
    pub fn is_symlink(&self) -> bool {
        self.st.is_symlink()
    }
    /// `st_size` in bytes (a symlink: its target's length).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u64 {
        self.st.st_size as u64
    }
    /// The permission bits.
    pub fn permissions(&self) -> Permissions {
        Permissions::from_mode(self.st.st_mode)
    }
    /// Last modification (`st_mtime`).
    ///
    /// # Errors
    /// None (uvfs always has it; `io::Result` as std's).
    pub fn modified(&self) -> io::Result<SystemTime> {
        Ok(system_time(self.st.st_mtime))
    }
    /// Last access (`st_atime`, as relatime keeps it).
    ///
    /// # Errors
    /// None (as [`modified`](Self::modified)).
    pub fn accessed(&self) -> io::Result<SystemTime> {
        Ok(system_time(self.st.st_atime))
    }
    /// Creation time (`statx`'s `stx_btime`, std's `created`): tmpfs keeps one; on a file
    /// system that reports none (hostfs), `Unsupported`, as std gives there.
    ///
    /// # Errors
    /// `io::ErrorKind::Unsupported` without a creation time.
    pub fn created(&self) -> io::Result<SystemTime> {
        self.btime.map(system_time).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                "creation time is not available on this file system",
            )
        })
    }
    /// Inode number (`MetadataExt::ino`).
    pub fn ino(&self) -> u64 {
        self.st.st_ino
    }
    /// The whole mode, type bits included (`MetadataExt::mode`).
    pub fn mode(&self) -> u32 {
        self.st.st_mode
    }
    /// Link count (`MetadataExt::nlink`).
    pub fn nlink(&self) -> u64 {
        self.st.st_nlink
    }
    /// Owner (`MetadataExt::uid`).
    pub fn uid(&self) -> u32 {
        self.st.st_uid
    }
    /// Group (`MetadataExt::gid`).
    pub fn gid(&self) -> u32 {
        self.st.st_gid
    }
    /// The full `stat` record.
    pub fn stat(&self) -> &Stat {
        &self.st
    }
}

/// One entry of a [`ReadDir`] (`std::fs::DirEntry`).
#[derive(Debug)]
pub struct DirEntry<'t, V: Variant = Uvfs> {
    dir: Rc<OwnedFd<'t, V>>,
    base: PathBuf,
    name: Vec<u8>,
    ino: u64,
    d_type: u8,
}

impl<V: Variant> DirEntry<'_, V> {
    /// The entry's name (no `/`).
    pub fn file_name(&self) -> OsString {
        OsStr::from_bytes(&self.name).to_os_string()
    }
    /// The directory's path (as given to [`Dir::read_dir`]) joined with the name.
    pub fn path(&self) -> PathBuf {
        self.base.join(OsStr::from_bytes(&self.name))
    }
    /// Inode number, from the listing (`DirEntryExt::ino`).
    pub fn ino(&self) -> u64 {
        self.ino
    }
    /// The entry's type, from the listing's `d_type` when the file system gives one, else
    /// from an `lstat` of the entry.
    ///
    /// # Errors
    /// Only for `DT_UNKNOWN`: as [`metadata`](Self::metadata).
    pub fn file_type(&self) -> io::Result<FileType> {
        if self.d_type == 0 {
            return Ok(self.metadata()?.file_type());
        }
        Ok(FileType::from_mode(u32::from(self.d_type) << 12))
    }
    /// The entry's attributes, a symlink not followed (std's `DirEntry::metadata`), looked
    /// up in the listed directory by name.
    ///
    /// # Errors
    /// `ENOENT` if the entry was removed since the listing.
    pub fn metadata(&self) -> io::Result<Metadata> {
        let (t, name) = (self.dir.task(), &self.name[..]);
        let st = t.fstatat(self.dir.fd(), name, AtFlags::SYMLINK_NOFOLLOW)?;
        let btime = btime(t, self.dir.fd(), name, AtFlags::SYMLINK_NOFOLLOW, st.st_ino);
        Ok(Metadata { st, btime })
    }
}

/// The iterator of [`Dir::read_dir`] (`std::fs::ReadDir`): reads the directory
/// `getdents64` buffer by buffer (4 KiB; memory bounded by one buffer), `.` and `..`
/// skipped.
#[derive(Debug)]
pub struct ReadDir<'t, V: Variant = Uvfs> {
    dir: Rc<OwnedFd<'t, V>>,
    base: PathBuf,
    buf: Vec<u8>,
    pending: std::vec::IntoIter<crate::readdir::DirEntry>,
    done: bool,
}

impl<'t, V: Variant> Iterator for ReadDir<'t, V> {
    type Item = io::Result<DirEntry<'t, V>>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            for e in self.pending.by_ref() {
                if e.name == b"." || e.name == b".." {
                    continue;
                }
                return Some(Ok(DirEntry {
                    dir: self.dir.clone(),
                    base: self.base.clone(),
                    name: e.name,
                    ino: e.d_ino,
                    d_type: e.d_type,
                }));
            }
            if self.done {
                return None;
            }
            match self.dir.task().getdents64(self.dir.fd(), &mut self.buf) {
                Ok(0) => {
                    self.done = true;
                    return None;
                }
                Ok(n) => self.pending = parse_dirents(&self.buf[..n]).into_iter(),
                Err(e) => {
                    self.done = true;
                    return Some(Err(err(e)));
                }
            }
        }
    }
}

/// One entry of a [`WalkDir`] (walkdir's `DirEntry`).
#[derive(Clone, Debug)]
pub struct WalkEntry {
    path: PathBuf,
    depth: usize,
    file_type: FileType,
}

impl WalkEntry {
    /// The path, the walk's root joined with the names below it.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// The final component (the root's own for depth 0).
    pub fn file_name(&self) -> &OsStr {
        self.path.file_name().unwrap_or(self.path.as_os_str())
    }
    /// 0 for the root, 1 for its entries, ...
    pub fn depth(&self) -> usize {
        self.depth
    }
    /// The entry's type (a symlink is a symlink: the walk does not follow them).
    pub fn file_type(&self) -> FileType {
        self.file_type
    }
}

/// A depth-first walk of a tree beneath a [`Dir`] (walkdir's `WalkDir`): the root, then
/// each directory followed by its contents; symlinks are listed, not followed. Each
/// directory is read whole when the walk enters it and then closed, so the walk holds at
/// most one descriptor at a time, and its memory is every entry of every directory along
/// the current path (those not visited yet). A directory that cannot be read yields its
/// error once, after its own entry, and is skipped. Unlike walkdir, a root that is a
/// symlink is listed as a symlink, not followed.
#[derive(Debug)]
pub struct WalkDir<'d, 't, V: Variant = Uvfs> {
    dir: &'d Dir<'t, V>,
    root: PathBuf,
    max_depth: usize,
    sort: bool,
    /// The entries still to visit, per directory level being walked.
    stack: Vec<std::vec::IntoIter<WalkEntry>>,
    started: bool,
    /// A directory's read error, yielded after the directory's own entry.
    pending: Option<io::Error>,
}

impl<V: Variant> WalkDir<'_, '_, V> {
    /// Do not descend below `depth` (0: the root only).
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = depth;
        self
    }
    /// Visit each directory's entries sorted by name (bytewise), for a stable order.
    pub fn sort_by_file_name(mut self) -> Self {
        self.sort = true;
        self
    }

    /// Reads directory `e` whole (one open, then closed).
    fn read(&self, e: &WalkEntry) -> io::Result<Vec<WalkEntry>> {
        let mut v = Vec::new();
        // O_NOFOLLOW: a directory replaced by a symlink since it was listed is not entered
        // (the walk follows no symlink).
        for d in self.dir.read_dir_flags(&e.path, OpenFlags::NOFOLLOW)? {
            let d = d?;
            v.push(WalkEntry {
                path: d.path(),
                depth: e.depth + 1,
                file_type: d.file_type()?,
            });
        }
        if self.sort {
            v.sort_by(|a, b| a.path.as_os_str().cmp(b.path.as_os_str()));
        }
        Ok(v)
    }
}

impl<V: Variant> Iterator for WalkDir<'_, '_, V> {
    type Item = io::Result<WalkEntry>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(x) = self.pending.take() {
            return Some(Err(x));
        }
        let e = if !self.started {
            self.started = true;
            match self.dir.symlink_metadata(&self.root) {
                Ok(m) => WalkEntry {
                    path: self.root.clone(),
                    depth: 0,
                    file_type: m.file_type(),
                },
                Err(x) => return Some(Err(x)),
            }
        } else {
            loop {
                let top = self.stack.last_mut()?;
                match top.next() {
                    Some(e) => break e,
                    None => {
                        self.stack.pop();
                    }
                }
            }
        };
        if e.file_type.is_dir() && e.depth < self.max_depth {
            match self.read(&e) {
                Ok(v) => self.stack.push(v.into_iter()),
                // The directory itself is still an entry; its error comes next.
                Err(x) => self.pending = Some(x),
            }
        }
        Some(Ok(e))
    }
}
