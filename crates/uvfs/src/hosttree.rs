//! Host import and export: a host directory tree copied into a [`Dir`] and back, keeping
//! types, data (holes stay holes), permission bits, owners (when the caller may set them),
//! times and hard links.
//!
//! Linux analogue: none (what `cp -a SRC/. DST` does, one file system being uvfs).
//!
//! # What is kept
//! - Directories, regular files, symlinks (their targets as stored), FIFOs, sockets and
//!   device nodes (`mknod`: devices need root on the creating side, as `cp -a`).
//! - Data, copied range by range as `SEEK_DATA`/`SEEK_HOLE` report it, so a sparse file
//!   stays sparse and its size is exact.
//! - Permission bits, set-ID and sticky bits included (applied after the owner, as `chown`
//!   clears set-ID bits); a directory's after its contents, so a read-only directory can be
//!   filled first, and a directory's whose mode would deny the copier search permission
//!   (0600) only once the whole tree is in, so a later hard link can still be made from
//!   it (`Deferred`).
//! - Owners when the creating side may give them (root, or `CAP_CHOWN`); otherwise the
//!   creator owns the copy and [`CopyStats::owners_not_kept`] counts it.
//! - Access and modification times to the nanosecond (symlinks' too); change times are the
//!   copy's own, as on any copy.
//! - Hard links: files that share an inode on the source share one in the copy.
//!
//! # Whose permissions
//! The host side is read and written with the uvfs *process's* own credentials, not the
//! task's: a task with a non-root `Cred` still imports any host file the process may
//! read, and an export's host files are created by the process. A sandbox that must not
//! see host files beyond what its task may should not call these for it (or should run
//! the process itself unprivileged). The uvfs side is the task's, as every call.
//!
//! # What is refused
//! Nothing existing is overwritten: a name that exists in the destination is `EEXIST` and
//! the copy stops there (what was copied stays). The destination directory itself may
//! exist (it must be a directory then) or is created with its parents. Both sides are
//! walked by descriptor, as `cp -a` and `tar` walk them (see "Depth"): a host file is
//! opened without following a symlink and must be the inode listed, a directory too, but
//! a host tree changed while it is copied can still give a mix of old and new, as `cp`
//! would. An export must not go into a directory the source tree can see (a hostfs bind
//! of its parent): it would copy itself into itself without end (`cp` refuses that case;
//! `uvfs mount` refuses it up front).
//!
//! # Depth
//! Any depth, `PATH_MAX` (4096 bytes) no bound: each directory is opened from its parent's
//! descriptor (`openat(parent, name, O_DIRECTORY | O_NOFOLLOW)`) on each side, and every
//! entry is named relative to its directory's (`fstatat`, `openat`, `mkdirat`,
//! `symlinkat`, `readlinkat`, `mknodat`, `linkat`, `fchownat`, `utimensat`, all
//! `AT_SYMLINK_NOFOLLOW` or `O_NOFOLLOW`): no call takes more than one name. A full path
//! is built only for an error's message. Descriptors stay bounded too: each side holds
//! its root's and those of the deepest [`HELD_LEVELS`] (64) directories of the walk; one
//! above them is reopened by name from the nearest held ancestor when the walk climbs
//! back to it, and must be the directory first opened (else "replaced while being
//! copied"), as GNU tar's cache of working directories does. So a side uses at most 65
//! directory descriptors and 3 more for the entry being copied (its file, a listing, a
//! hard link's directory), whatever the depth: uvfs's `RLIMIT_NOFILE` (default 1024) and
//! the host's bound no depth, and `EMFILE` means the table was nearly full already. The
//! price: climbing back out of a chain of depth `d` reopens about `d² / 128` directories
//! (tested: 2100 levels, 4200 bytes of path, in and out of tmpfs and hostfs with the task
//! limited to 100 descriptors; 3000 levels once).
//!
//! # Tar
//! With the `tar` feature, `Dir::unpack_tar` and `Dir::pack_tar` do the same with a
//! tar archive on either side (the `tar` crate's reader and writer; GNU tar reads what
//! `pack_tar` writes and `unpack_tar` reads what GNU tar writes, tested). An archive entry
//! that would land outside the destination (absolute, `..`) is refused.
//!
//! # Memory
//! Per directory on the walk's current path: its name, attributes (applied when it is
//! complete) and the names in it still to copy; one relative path per hard-linked inode
//! (its first copy, for the next names to link to); one relative path and its attributes
//! per directory whose mode would deny the copier search (applied at the end); data moves
//! through one 64 KiB buffer.

use crate::dir::Dir;
use crate::fs::hostfs::{fs_attrs, key_of};
use crate::io::OwnedFd;
use crate::readdir::parse_dirents;
use crate::task::Task;
use crate::types::*;
use crate::variant::Variant;
use crate::Errno;
use rustix::fd::AsFd;
use rustix::fs::{AtFlags as HostAt, Mode, OFlags, CWD};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The chunk data moves in (bytes).
const CHUNK: usize = 64 * 1024;

/// What an import or export copied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CopyStats {
    /// Directories created (the destination itself included when it was created).
    pub dirs: u64,
    /// Regular files created (a hard link to one already copied is not counted here).
    pub files: u64,
    /// Symlinks created.
    pub symlinks: u64,
    /// FIFOs, sockets and device nodes created.
    pub nodes: u64,
    /// Names made as hard links to a file already copied.
    pub hard_links: u64,
    /// Data bytes copied (holes are not copied, so a sparse file counts its data only).
    pub bytes: u64,
    /// Files whose owner could not be kept (the creating side is not root).
    pub owners_not_kept: u64,
}

/// One entry's attributes, as both sides give them.
#[derive(Clone, Copy)]
struct Attrs {
    mode: u32,
    uid: u32,
    gid: u32,
    atime: Timespec,
    mtime: Timespec,
}

/// An error of [`Dir::import_host`] or [`Dir::export_host`]: the I/O error and, when it
/// happened while copying one entry, that entry's source and destination (what `cp`
/// names in its message).
#[derive(Debug)]
pub struct CopyError {
    /// The entry being copied, `(source, destination)`: a host path as the host tree's
    /// root was given joined with the entry's relative path, a uvfs path as `from`/`to` was
    /// given joined with it (relative to the [`Dir`]). `None` for an error about the roots
    /// themselves (a source that is missing or not a directory, a destination that cannot
    /// be made).
    pub entry: Option<(PathBuf, PathBuf)>,
    /// What failed.
    pub error: io::Error,
    /// The entry's source is the uvfs side (an export).
    uvfs_source: bool,
}

impl CopyError {
    /// The error's OS error number ([`io::Error::raw_os_error`]): `Some(17)` for `EEXIST`.
    pub fn raw_os_error(&self) -> Option<i32> {
        self.error.raw_os_error()
    }

    /// The error's kind ([`io::Error::kind`]).
    pub fn kind(&self) -> io::ErrorKind {
        self.error.kind()
    }

    /// This error with the uvfs side of its entry (an import's destination, an export's
    /// source) named beneath `dir`, the path of the [`Dir`] called as its user knows it:
    /// with `/` for a root `Dir`, `x/f` reads `/x/f`.
    pub fn beneath(mut self, dir: &Path) -> CopyError {
        if let Some((from, to)) = &mut self.entry {
            let side = if self.uvfs_source { from } else { to };
            *side = dir.join(side.strip_prefix(".").unwrap_or(side));
        }
        self
    }

    /// `error` while importing the host file `host` as the uvfs path `uvfs`.
    fn imported(host: PathBuf, uvfs: PathBuf, error: io::Error) -> CopyError {
        CopyError {
            entry: Some((host, uvfs)),
            error,
            uvfs_source: false,
        }
    }

    /// `error` while exporting the uvfs path `uvfs` as the host file `host`.
    fn exported(uvfs: PathBuf, host: PathBuf, error: io::Error) -> CopyError {
        CopyError {
            entry: Some((uvfs, host)),
            error,
            uvfs_source: true,
        }
    }
}

impl std::fmt::Display for CopyError {
    /// `copying SOURCE to DESTINATION: ERROR`, or the error alone.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.entry {
            Some((from, to)) => write!(
                f,
                "copying {} to {}: {}",
                from.display(),
                to.display(),
                self.error
            ),
            None => self.error.fmt(f),
        }
    }
}

impl std::error::Error for CopyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<io::Error> for CopyError {
    /// An error about the roots (no entry).
    fn from(error: io::Error) -> CopyError {
        CopyError {
            entry: None,
            error,
            uvfs_source: false,
        }
    }
}

impl From<CopyError> for io::Error {
    /// The error itself when no entry is named; else one of the same kind that carries the
    /// `CopyError` (its message names the entry; `get_ref()` and a downcast to
    /// `CopyError` give back the OS error number, which `io::Error::raw_os_error` of a
    /// custom error does not).
    fn from(e: CopyError) -> io::Error {
        match e.entry {
            None => e.error,
            Some(_) => io::Error::new(e.error.kind(), e),
        }
    }
}

fn err(e: Errno) -> io::Error {
    e.into()
}

fn join(base: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = base.to_vec();
    if !p.is_empty() {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// A host path below `root` for the relative bytes `rel` (empty: `root`); for messages only
/// (no call takes a path below a root: it may be longer than `PATH_MAX`).
fn host_path(root: &Path, rel: &[u8]) -> PathBuf {
    if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(OsStr::from_bytes(rel))
    }
}

/// Directory levels whose descriptors one side of a copy holds open at once besides its
/// root: the deepest ones, where the walk is. A level above them is reopened by name from
/// the nearest held ancestor when the walk climbs back to it (GNU tar keeps a cache of 16
/// such descriptors, `wdcache`). Each side thus holds at most `HELD_LEVELS + 1` directory
/// descriptors, plus a few for the entry being copied, at any depth (module doc, "Depth").
pub const HELD_LEVELS: usize = 64;

/// A directory's identity on its side, `(st_dev, st_ino)`: checked when it is reopened.
type Id = (u64, u64);

/// A host descriptor.
type HostFd = rustix::fd::OwnedFd;

/// One side's descriptors of the directories from the copy's root (level 0) down to the one
/// being filled (the top), so that every entry is named relative to its own directory, as
/// `cp -a` and `tar` name them, never by a path that could pass `PATH_MAX`.
///
/// # Invariants
/// - `fds` and `ids` hold one entry per level; `fds[0]` is `Some`.
/// - At most `HELD_LEVELS + 1` entries of `fds` are `Some`: level 0 and levels at least
///   `len - HELD_LEVELS`. A closed level is reopened from its nearest held ancestor, one
///   name at a time, and must have its `ids` entry again.
struct Levels<F, O> {
    fds: Vec<Option<F>>,
    ids: Vec<Id>,
    /// Opens the directory `name` in a directory of this side, not following a symlink,
    /// and gives its identity.
    open: O,
}

/// A directory as [`Levels::open_path`] gives it: a held level's, or opened for the call.
enum Held<'a, F> {
    Level(&'a F),
    Opened(F),
}

impl<F> Held<'_, F> {
    fn get(&self) -> &F {
        match self {
            Held::Level(f) => f,
            Held::Opened(f) => f,
        }
    }
}

/// The error of a directory not found at its level again (renamed, replaced meanwhile).
fn replaced() -> io::Error {
    io::Error::other("replaced while being copied")
}

impl<F, O: Fn(&F, &[u8]) -> io::Result<(F, Id)>> Levels<F, O> {
    fn new(root: F, id: Id, open: O) -> Self {
        Levels {
            fds: vec![Some(root)],
            ids: vec![id],
            open,
        }
    }

    /// Enters the directory `fd` (identity `id`) below the top; closes the level that
    /// leaves the window.
    fn push(&mut self, fd: F, id: Id) {
        self.fds.push(Some(fd));
        self.ids.push(id);
        if self.fds.len() > HELD_LEVELS + 1 {
            let old = self.fds.len() - 1 - HELD_LEVELS;
            self.fds[old] = None;
        }
    }

    /// Leaves the top level (never the root).
    fn pop(&mut self) {
        if self.fds.len() > 1 {
            self.fds.pop();
            self.ids.pop();
        }
    }

    /// Reopens the top level if it was closed, with the levels of the window above it,
    /// from the nearest held ancestor; `names[i]` is level `i`'s name in level `i - 1`.
    fn ensure_top(&mut self, names: &[Vec<u8>]) -> io::Result<()> {
        let top = self.fds.len() - 1;
        if self.fds[top].is_some() {
            return Ok(());
        }
        let from = self.fds[..top]
            .iter()
            .rposition(Option::is_some)
            .unwrap_or(0);
        let mut opened: Option<F> = None;
        for (i, name) in names.iter().enumerate().take(top + 1).skip(from + 1) {
            let (fd, id) = {
                let parent = match &opened {
                    Some(f) => f,
                    None => self.fds[i - 1].as_ref().ok_or_else(|| err(Errno::EBADF))?,
                };
                (self.open)(parent, name)?
            };
            if id != self.ids[i] {
                return Err(replaced());
            }
            if top - i < HELD_LEVELS {
                self.fds[i] = Some(fd);
                opened = None;
            } else {
                opened = Some(fd);
            }
        }
        Ok(())
    }

    /// The top level's descriptor (after [`ensure_top`](Self::ensure_top)).
    fn top(&self) -> io::Result<&F> {
        let top = self.fds.len() - 1;
        self.fds[top].as_ref().ok_or_else(|| err(Errno::EBADF))
    }

    /// The directory whose path from the root is `comps`: from the deepest held level on
    /// its way (the root at worst), one name at a time. `names` as for `ensure_top`.
    fn open_path(&self, names: &[Vec<u8>], comps: &[&[u8]]) -> io::Result<Held<'_, F>> {
        let common = comps
            .iter()
            .zip(&names[1..])
            .take_while(|(c, n)| **c == n.as_slice())
            .count();
        let from = self.fds[..=common]
            .iter()
            .rposition(Option::is_some)
            .unwrap_or(0);
        let held = self.fds[from].as_ref().ok_or_else(|| err(Errno::EBADF))?;
        let mut opened: Option<F> = None;
        for c in &comps[from..] {
            let (fd, _) = (self.open)(opened.as_ref().unwrap_or(held), c)?;
            opened = Some(fd);
        }
        Ok(match opened {
            Some(f) => Held::Opened(f),
            None => Held::Level(held),
        })
    }
}

/// The parent's components and the final name of the relative path `rel` (not empty).
fn split_rel(rel: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    let mut comps: Vec<&[u8]> = rel.split(|&c| c == b'/').collect();
    let last = comps.pop().unwrap_or_default();
    (comps, last)
}

/// `S_IXUSR`: the owner's search (execute) bit.
const S_IXUSR: u32 = 0o100;

/// The directories of a copy whose attributes wait for the end of the walk, each as its
/// path relative to the roots, in the order they were completed (children before
/// parents).
///
/// A directory's attributes are otherwise applied as soon as its contents are in. But a
/// later hard link to a file whose first copy lies in a completed directory is made from
/// that directory (`linkat` from it, reached by name from the root), which needs the
/// copier's search permission on it and on each directory above it. A directory whose
/// final owner and mode would take that away (a mode without `S_IXUSR`, e.g. 0600) stays
/// as it was made (0700, the copier's) until the whole tree is in: then its owner, mode
/// and times are set, in this order, the directory reached from the root by descriptor
/// (any depth), while its deferred ancestors are still 0700. Nothing later writes into a
/// completed directory (every entry is made in the directory being filled), so write
/// permission blocks nothing. Only such directories are held here. If the copy fails
/// before its end they stay 0700, as every directory did before 0306f5e.
#[derive(Default)]
struct Deferred {
    dirs: Vec<(Vec<u8>, Attrs)>,
}

/// Whether a uvfs directory given the attributes `a` (its owner where the task may give it
/// one, else the task's) would deny the task `cred` search permission, or its owner's
/// search bit is clear (a hostfs directory is also searched on the host by the process,
/// which owns it there when not root).
fn uvfs_dir_unsearchable(cred: &crate::Cred, a: &Attrs) -> bool {
    let (uid, gid) = if cred.capable(crate::Caps::CHOWN) {
        (a.uid, a.gid)
    } else {
        (cred.uid, cred.gid)
    };
    let mode = S_IFDIR | (a.mode & 0o7777);
    a.mode & S_IXUSR == 0
        || cred
            .permission(mode, uid, gid, crate::cred::MAY_EXEC)
            .is_err()
}

/// Whether a host directory given the attributes `a` would deny its owner search
/// permission (the process owns what it makes; as root it may pass the check anyway, but
/// a root without `CAP_DAC_OVERRIDE` would not: deferred all the same).
fn host_dir_unsearchable(a: &Attrs) -> bool {
    a.mode & S_IXUSR == 0
}

/// A directory being copied: its entries still to copy and its attributes (set once they
/// are in).
struct Frame {
    todo: std::vec::IntoIter<Vec<u8>>,
    attrs: Attrs,
    /// The length of the parent's relative path (the walk's `rel` is cut back to it).
    parent_rel: usize,
}

/// A directory entered: its two descriptors with their identities, its entries, its
/// attributes.
struct Enter<S, D> {
    src: (S, Id),
    dst: (D, Id),
    todo: Vec<Vec<u8>>,
    attrs: Attrs,
}

impl<S, D> Enter<S, D> {
    /// Makes this directory, `name` in the walk's top one, the new top (both walks):
    /// both sides' levels, its name in `names`, its frame; `rel` becomes its path.
    fn push<SO, DO>(
        self,
        name: Vec<u8>,
        src: &mut Levels<S, SO>,
        dst: &mut Levels<D, DO>,
        rel: &mut Vec<u8>,
        names: &mut Vec<Vec<u8>>,
        frames: &mut Vec<Frame>,
    ) where
        SO: Fn(&S, &[u8]) -> io::Result<(S, Id)>,
        DO: Fn(&D, &[u8]) -> io::Result<(D, Id)>,
    {
        src.push(self.src.0, self.src.1);
        dst.push(self.dst.0, self.dst.1);
        let parent_rel = rel.len();
        *rel = join(rel, &name);
        names.push(name);
        frames.push(Frame {
            todo: self.todo.into_iter(),
            attrs: self.attrs,
            parent_rel,
        });
    }
}

/// `openat(parent, name, how | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)` on the host, with
/// the directory's identity.
fn host_open_dir(parent: &HostFd, name: &[u8], how: OFlags) -> io::Result<(HostFd, Id)> {
    let flags = how | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(parent, OsStr::from_bytes(name), flags, Mode::empty())?;
    let st = rustix::fs::fstat(&fd)?;
    Ok((fd, key_of(&st)))
}

/// `openat(parent, name, how | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)` in uvfs, with the
/// directory's identity.
fn uvfs_open_dir<'t, V: Variant>(
    t: &'t Task<V>,
    parent: Fd,
    name: &[u8],
    how: OpenFlags,
) -> io::Result<(OwnedFd<'t, V>, Id)> {
    let flags = how | OpenFlags::DIRECTORY | OpenFlags::NOFOLLOW | OpenFlags::CLOEXEC;
    let fd = OwnedFd::new(t, t.openat(parent, name, flags, 0)?);
    let st = t.fstat(fd.fd())?;
    Ok((fd, (st.st_dev, st.st_ino)))
}

/// The names in the host directory `fd` (not `.`, `..`), in the host's order.
fn host_names(fd: &HostFd) -> io::Result<Vec<Vec<u8>>> {
    let mut dir = rustix::fs::Dir::read_from(fd)?;
    let mut out = Vec::new();
    while let Some(e) = dir.read() {
        let name = e?.file_name().to_bytes().to_vec();
        if name != b"." && name != b".." {
            out.push(name);
        }
    }
    Ok(out)
}

/// The names in the uvfs directory `fd` (open for reading; not `.`, `..`), in the file
/// system's order.
fn uvfs_names<V: Variant>(t: &Task<V>, fd: Fd) -> io::Result<Vec<Vec<u8>>> {
    let mut buf = vec![0u8; 4096];
    let mut out = Vec::new();
    loop {
        let n = t.getdents64(fd, &mut buf)?;
        if n == 0 {
            return Ok(out);
        }
        for e in parse_dirents(&buf[..n]) {
            if e.name != b"." && e.name != b".." {
                out.push(e.name);
            }
        }
    }
}

impl<'t, V: Variant> Dir<'t, V> {
    /// Copies the host directory tree `host` into the directory `to` beneath this one (made
    /// with its parents if missing), as `cp -a host/. to` (see the module doc for what is
    /// kept and refused). Any depth: every entry is named relative to its directory's
    /// descriptor on both sides (see the module doc's "Depth").
    ///
    /// # Errors
    /// `ENOTDIR` if `host` or `to` is not a directory; `EEXIST` for a name that exists in
    /// `to`; the host's errors reading (`EACCES`, ...); uvfs's creating (`ENOSPC`,
    /// `EPERM` for a device node by a non-root task, `EXDEV` for `to` outside this `Dir`);
    /// `EMFILE` on either side if its descriptor table has fewer than about 70 free.
    /// What was copied before the error stays. An error while copying an entry names it
    /// ([`CopyError::entry`]).
    pub fn import_host(
        &self,
        host: impl AsRef<Path>,
        to: impl AsRef<Path>,
    ) -> Result<CopyStats, CopyError> {
        let host = host.as_ref();
        let to = to.as_ref();
        // The root is followed if it is a symlink (as `cp -a host/.`); nothing below it is.
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let root = rustix::fs::open(host, flags, Mode::empty()).map_err(|e| {
            // A root that is there but cannot be read (`EACCES`) is named, as an entry
            // below it would be; a missing one or one that is no directory is not.
            let e = io::Error::from(e);
            match std::fs::metadata(host) {
                Ok(m) if m.is_dir() => CopyError::imported(host.to_path_buf(), to.to_path_buf(), e),
                _ => e.into(),
            }
        })?;
        let root_st = rustix::fs::fstat(&root).map_err(io::Error::from)?;
        let mut stats = CopyStats::default();
        let dst = self.dest_dir(to, &mut stats)?.into_owned_fd();
        let t = self.task();
        let dst_id = t.fstat(dst.fd()).map(|st| (st.st_dev, st.st_ino));
        let todo = host_names(&root)
            .map_err(|e| CopyError::imported(host.to_path_buf(), to.to_path_buf(), e))?;
        let mut src = Levels::new(root, key_of(&root_st), |p: &HostFd, name: &[u8]| {
            host_open_dir(p, name, OFlags::RDONLY)
        });
        let mut dstl = Levels::new(
            dst,
            dst_id.map_err(err)?,
            |p: &OwnedFd<'t, V>, name: &[u8]| uvfs_open_dir(t, p.fd(), name, OpenFlags::PATH),
        );
        let mut links: HashMap<Id, Vec<u8>> = HashMap::new();
        // Directories whose attributes wait for the end of the walk (see `Deferred`).
        let mut deferred = Deferred::default();
        // Per level: its name in its parent (the root's is empty) and what is left of it.
        let mut names: Vec<Vec<u8>> = vec![Vec::new()];
        let mut frames = vec![Frame {
            todo: todo.into_iter(),
            attrs: host_attrs(&root_st),
            parent_rel: 0,
        }];
        // The top level's path relative to the roots (messages and hard links only).
        let mut rel: Vec<u8> = Vec::new();
        let mut buf = vec![0u8; CHUNK];
        while let Some(frame) = frames.last_mut() {
            let Some(name) = frame.todo.next() else {
                // A directory is complete: its attributes, in its parent (children before
                // parents, so a read-only directory is filled first).
                let Some(done) = frames.pop() else { break };
                if frames.is_empty() {
                    // The deferred directories (children before parents, their deferred
                    // ancestors still 0700), each reached from the root by descriptor;
                    // then the root itself.
                    for (rp, a) in &deferred.dirs {
                        let (comps, dname) = split_rel(rp);
                        let r = dstl.open_path(&names, &comps).and_then(|p| {
                            set_uvfs_attrs(t, p.get().fd(), dname, *a, false, &mut stats)
                        });
                        r.map_err(|e| {
                            CopyError::imported(host_path(host, rp), host_path(to, rp), e)
                        })?;
                    }
                    let r = dstl.top().and_then(|fd| {
                        set_uvfs_attrs(t, fd.fd(), b"", done.attrs, false, &mut stats)
                    });
                    r.map_err(|e| CopyError::imported(host.to_path_buf(), to.to_path_buf(), e))?;
                    break;
                }
                let dname = names.pop().unwrap_or_default();
                src.pop();
                dstl.pop();
                if uvfs_dir_unsearchable(t.cred(), &done.attrs) {
                    deferred.dirs.push((rel.clone(), done.attrs));
                } else {
                    let r = dstl.ensure_top(&names).and_then(|()| {
                        let pfd = dstl.top()?.fd();
                        set_uvfs_attrs(t, pfd, &dname, done.attrs, false, &mut stats)
                    });
                    r.map_err(|e| {
                        CopyError::imported(host_path(host, &rel), host_path(to, &rel), e)
                    })?;
                }
                rel.truncate(done.parent_rel);
                continue;
            };
            let r = (|| -> io::Result<Option<Enter<HostFd, OwnedFd<'t, V>>>> {
                src.ensure_top(&names)?;
                dstl.ensure_top(&names)?;
                let sfd = src.top()?;
                let pfd = dstl.top()?.fd();
                let hname = OsStr::from_bytes(&name);
                let m = rustix::fs::statat(sfd, hname, HostAt::SYMLINK_NOFOLLOW)?;
                let a = host_attrs(&m);
                let ft = m.st_mode & S_IFMT;
                // Every name is made in its parent opened without following symlinks: no
                // symlink in the tree (one made meanwhile) redirects a copy.
                if ft == S_IFDIR {
                    t.mkdirat(pfd, &name[..], 0o700)?;
                    stats.dirs += 1;
                    let (s, sid) = host_open_dir(sfd, &name, OFlags::RDONLY)?;
                    if sid != key_of(&m) {
                        return Err(replaced());
                    }
                    let d = uvfs_open_dir(t, pfd, &name, OpenFlags::PATH)?;
                    let todo = host_names(&s)?;
                    return Ok(Some(Enter {
                        src: (s, sid),
                        dst: d,
                        todo,
                        attrs: a,
                    }));
                }
                if ft == S_IFREG && m.st_nlink > 1 {
                    if let Some(first) = links.get(&key_of(&m)) {
                        let (comps, fname) = split_rel(first);
                        let fp = dstl.open_path(&names, &comps)?;
                        t.linkat(fp.get().fd(), fname, pfd, &name[..], AtFlags::empty())?;
                        stats.hard_links += 1;
                        return Ok(None);
                    }
                    links.insert(key_of(&m), join(&rel, &name));
                }
                match ft {
                    S_IFREG => {
                        // Not following a symlink swapped in since the lstat, not blocking on
                        // a FIFO swapped in, and the inode listed (as GNU cp checks).
                        let how = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK;
                        let f =
                            rustix::fs::openat(sfd, hname, how | OFlags::CLOEXEC, Mode::empty())?;
                        if key_of(&rustix::fs::fstat(&f)?) != key_of(&m) {
                            return Err(replaced());
                        }
                        let f = std::fs::File::from(f);
                        let size = m.st_size.max(0) as u64;
                        let fd = create_new(t, pfd, &name)?;
                        stats.bytes += copy_ranges(
                            size,
                            |off, whence| host_seek(&f, off, whence),
                            |b, off| f.read_at(b, off),
                            |b, off| Ok(t.pwrite(fd.fd(), b, off as i64)?),
                            &mut buf,
                        )?;
                        t.ftruncate(fd.fd(), size as i64)?;
                        stats.files += 1;
                    }
                    S_IFLNK => {
                        let target = rustix::fs::readlinkat(sfd, hname, Vec::new())?;
                        t.symlinkat(target.as_bytes(), pfd, &name[..])?;
                        stats.symlinks += 1;
                    }
                    _ => {
                        t.mknodat(pfd, &name[..], ft | 0o600, m.st_rdev)?;
                        stats.nodes += 1;
                    }
                }
                set_uvfs_attrs(t, pfd, &name, a, ft == S_IFLNK, &mut stats)?;
                Ok(None)
            })();
            match r {
                Ok(None) => {}
                Ok(Some(e)) => e.push(name, &mut src, &mut dstl, &mut rel, &mut names, &mut frames),
                Err(e) => {
                    let rp = join(&rel, &name);
                    return Err(CopyError::imported(
                        host_path(host, &rp),
                        host_path(to, &rp),
                        e,
                    ));
                }
            }
        }
        Ok(stats)
    }

    /// `to` beneath this directory, made (with its parents) if missing; counts itself in
    /// `stats.dirs` when made.
    fn dest_dir(&self, to: &Path, stats: &mut CopyStats) -> io::Result<Dir<'t, V>> {
        // Followed (beneath this Dir) if a symlink, as `cp -a ... to` follows it.
        match self.metadata(to) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(err(Errno::ENOTDIR)),
            Err(e) if e.raw_os_error() == Some(Errno::ENOENT.raw()) => {
                self.create_dir_all(to)?;
                stats.dirs += 1;
            }
            Err(e) => return Err(e),
        }
        self.open_dir(to)
    }

    /// Copies the directory tree `from` beneath this one to the host directory `host` (made
    /// with its parents if missing; followed if a symlink), as `cp -a from/. host` (see
    /// the module doc). Any depth, as [`import_host`](Self::import_host).
    ///
    /// # Errors
    /// `ENOTDIR` if `from` or `host` is not a directory; `EEXIST` for a name that exists in
    /// `host`; uvfs's errors reading; the host's creating (`EACCES`, `ENOSPC`, `EPERM` for
    /// a device node when not root); `EMFILE` on either side if its descriptor table has
    /// fewer than about 70 free. What was copied before the error stays. An error while
    /// copying an entry names it ([`CopyError::entry`]).
    pub fn export_host(
        &self,
        from: impl AsRef<Path>,
        host: impl AsRef<Path>,
    ) -> Result<CopyStats, CopyError> {
        let host = host.as_ref();
        let from = from.as_ref();
        let src_dir = self.open_dir(from)?;
        let t = self.task();
        let mut stats = CopyStats::default();
        let resolved;
        // The root is followed if it is a symlink (as `cp -a from/. host`: the copy and the
        // root's attributes go to the directory it names, the link stays as it was);
        // nothing below it is. Followed once, here: the names below are made under the
        // directory itself, and its attributes, set by path without following a final
        // symlink, are set on it rather than refused (`EOPNOTSUPP`) on the link.
        let host = match std::fs::metadata(host) {
            Ok(m) if m.is_dir() => {
                if std::fs::symlink_metadata(host)?.file_type().is_symlink() {
                    resolved = std::fs::canonicalize(host)?;
                    resolved.as_path()
                } else {
                    host
                }
            }
            Ok(_) => return Err(err(Errno::ENOTDIR).into()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::fs::create_dir_all(host)?;
                stats.dirs += 1;
                host
            }
            Err(e) => return Err(e.into()),
        };
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let hroot = rustix::fs::open(host, flags, Mode::empty()).map_err(io::Error::from)?;
        let hroot_id = rustix::fs::fstat(&hroot).map_err(io::Error::from)?;
        // A root that cannot be read (`EACCES`) is named, as an entry below it would be.
        let (sroot, sroot_id) = uvfs_open_dir(t, src_dir.fd(), b".", OpenFlags::RDONLY)
            .map_err(|e| CopyError::exported(from.to_path_buf(), host.to_path_buf(), e))?;
        drop(src_dir);
        let root_st = t.fstat(sroot.fd()).map_err(err)?;
        let todo = uvfs_names(t, sroot.fd())
            .map_err(|e| CopyError::exported(from.to_path_buf(), host.to_path_buf(), e))?;
        let mut srcl = Levels::new(sroot, sroot_id, |p: &OwnedFd<'t, V>, name: &[u8]| {
            uvfs_open_dir(t, p.fd(), name, OpenFlags::RDONLY)
        });
        let mut dst = Levels::new(hroot, key_of(&hroot_id), |p: &HostFd, name: &[u8]| {
            host_open_dir(p, name, OFlags::PATH)
        });
        let mut links: HashMap<Id, Vec<u8>> = HashMap::new();
        let mut deferred = Deferred::default();
        let mut names: Vec<Vec<u8>> = vec![Vec::new()];
        let mut frames = vec![Frame {
            todo: todo.into_iter(),
            attrs: uvfs_attrs(&root_st),
            parent_rel: 0,
        }];
        let mut rel: Vec<u8> = Vec::new();
        let mut buf = vec![0u8; CHUNK];
        let root = rustix::process::geteuid().is_root();
        while let Some(frame) = frames.last_mut() {
            let Some(name) = frame.todo.next() else {
                let Some(done) = frames.pop() else { break };
                if frames.is_empty() {
                    // The deferred directories, as in `import_host`.
                    for (rp, a) in &deferred.dirs {
                        let (comps, dname) = split_rel(rp);
                        let dname = Path::new(OsStr::from_bytes(dname));
                        let r = dst.open_path(&names, &comps).and_then(|p| {
                            set_host_attrs(p.get(), dname, *a, false, root, &mut stats)
                        });
                        r.map_err(|e| {
                            CopyError::exported(host_path(from, rp), host_path(host, rp), e)
                        })?;
                    }
                    // By path, the root having been resolved above.
                    set_host_attrs(CWD, host, done.attrs, false, root, &mut stats).map_err(
                        |e| CopyError::exported(from.to_path_buf(), host.to_path_buf(), e),
                    )?;
                    break;
                }
                let dname = names.pop().unwrap_or_default();
                srcl.pop();
                dst.pop();
                if host_dir_unsearchable(&done.attrs) {
                    deferred.dirs.push((rel.clone(), done.attrs));
                } else {
                    let r = dst.ensure_top(&names).and_then(|()| {
                        let hname = Path::new(OsStr::from_bytes(&dname));
                        set_host_attrs(dst.top()?, hname, done.attrs, false, root, &mut stats)
                    });
                    r.map_err(|e| {
                        CopyError::exported(host_path(from, &rel), host_path(host, &rel), e)
                    })?;
                }
                rel.truncate(done.parent_rel);
                continue;
            };
            let r = (|| -> io::Result<Option<Enter<OwnedFd<'t, V>, HostFd>>> {
                srcl.ensure_top(&names)?;
                dst.ensure_top(&names)?;
                // Read in the parent opened without following symlinks (a symlink made
                // meanwhile cannot lead the copy out of `from`).
                let sfd = srcl.top()?.fd();
                let hfd = dst.top()?;
                let hname = OsStr::from_bytes(&name);
                let st = t.fstatat(sfd, &name[..], AtFlags::SYMLINK_NOFOLLOW)?;
                let a = uvfs_attrs(&st);
                let ft = st.st_mode & S_IFMT;
                if ft == S_IFDIR {
                    rustix::fs::mkdirat(hfd, hname, Mode::from_raw_mode(0o700))?;
                    stats.dirs += 1;
                    let (s, sid) = uvfs_open_dir(t, sfd, &name, OpenFlags::RDONLY)?;
                    if sid != (st.st_dev, st.st_ino) {
                        return Err(replaced());
                    }
                    let d = host_open_dir(hfd, &name, OFlags::PATH)?;
                    let todo = uvfs_names(t, s.fd())?;
                    return Ok(Some(Enter {
                        src: (s, sid),
                        dst: d,
                        todo,
                        attrs: a,
                    }));
                }
                if ft == S_IFREG && st.st_nlink > 1 {
                    if let Some(first) = links.get(&(st.st_dev, st.st_ino)) {
                        let (comps, fname) = split_rel(first);
                        let fp = dst.open_path(&names, &comps)?;
                        let fname = OsStr::from_bytes(fname);
                        rustix::fs::linkat(fp.get(), fname, hfd, hname, HostAt::empty())?;
                        stats.hard_links += 1;
                        return Ok(None);
                    }
                    links.insert((st.st_dev, st.st_ino), join(&rel, &name));
                }
                match ft {
                    S_IFREG => {
                        let fd = open_read(t, sfd, &name)?;
                        let how = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL;
                        let how = how | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                        let out = rustix::fs::openat(hfd, hname, how, Mode::from_raw_mode(0o600))?;
                        let out = std::fs::File::from(out);
                        stats.bytes += copy_ranges(
                            st.st_size as u64,
                            |off, whence| t.lseek(fd.fd(), off as i64, whence).map(|p| p as u64),
                            |b, off| Ok(t.pread(fd.fd(), b, off as i64)?),
                            |b, off| out.write_at(b, off),
                            &mut buf,
                        )?;
                        out.set_len(st.st_size as u64)?;
                        stats.files += 1;
                    }
                    S_IFLNK => {
                        let n = t.readlinkat(sfd, &name[..], &mut buf)?;
                        rustix::fs::symlinkat(OsStr::from_bytes(&buf[..n]), hfd, hname)?;
                        stats.symlinks += 1;
                    }
                    _ => {
                        rustix::fs::mknodat(
                            hfd,
                            hname,
                            rustix::fs::FileType::from_raw_mode(ft),
                            Mode::from_raw_mode(0o600),
                            st.st_rdev,
                        )?;
                        stats.nodes += 1;
                    }
                }
                set_host_attrs(hfd, Path::new(hname), a, ft == S_IFLNK, root, &mut stats)?;
                Ok(None)
            })();
            match r {
                Ok(None) => {}
                Ok(Some(e)) => e.push(name, &mut srcl, &mut dst, &mut rel, &mut names, &mut frames),
                Err(e) => {
                    let rp = join(&rel, &name);
                    return Err(CopyError::exported(
                        host_path(from, &rp),
                        host_path(host, &rp),
                        e,
                    ));
                }
            }
        }
        Ok(stats)
    }
}

/// Copies the data ranges of a file of `size` bytes: `seek(off, SEEK_DATA|SEEK_HOLE)` on
/// the source finds them (`ENXIO`: no data past `off`), `read_at`/`write_at` move them.
/// Returns the bytes copied. A source whose file system has no hole support reports the
/// whole file as data, which is then copied whole.
fn copy_ranges(
    size: u64,
    seek: impl Fn(u64, i32) -> Result<u64, Errno>,
    read_at: impl Fn(&mut [u8], u64) -> io::Result<usize>,
    write_at: impl Fn(&[u8], u64) -> io::Result<usize>,
    buf: &mut [u8],
) -> io::Result<u64> {
    let mut copied = 0;
    let mut off = 0u64;
    while off < size {
        let data = match seek(off, SEEK_DATA) {
            Ok(d) => d,
            Err(Errno::ENXIO) => break,
            Err(e) => return Err(err(e)),
        };
        // A file system answering below `off` would make this loop forever: no progress
        // is taken as the end of the data.
        if data < off {
            break;
        }
        let hole = seek(data, SEEK_HOLE).map_err(err)?.min(size);
        let mut pos = data;
        while pos < hole {
            let want = ((hole - pos) as usize).min(buf.len());
            let n = read_at(&mut buf[..want], pos)?;
            if n == 0 {
                // Shrunk while copied: the copy ends here (the caller then sets the size
                // it listed, so the tail reads as zeros).
                return Ok(copied);
            }
            let mut w = &buf[..n];
            let mut at = pos;
            while !w.is_empty() {
                let k = write_at(w, at)?;
                if k == 0 {
                    return Err(io::ErrorKind::WriteZero.into());
                }
                w = &w[k..];
                at += k as u64;
            }
            pos += n as u64;
            copied += n as u64;
        }
        off = hole.max(data + 1);
    }
    Ok(copied)
}

/// `chmod` of `name` in the host directory `dfd` without following a final symlink (one
/// swapped in meanwhile is refused with `EOPNOTSUPP`): through an `O_PATH|O_NOFOLLOW`
/// descriptor and its `/proc/self/fd` link, as glibc's `fchmodat(AT_SYMLINK_NOFOLLOW)` does
/// (rustix has no `fchmodat2`); by name (`fchmodat`) where /proc is not mounted.
fn host_chmod_nofollow(dfd: impl AsFd, name: &Path, mode: u32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let how = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(&dfd, name, how, Mode::empty())?;
    if rustix::fs::fstat(&fd)?.st_mode & S_IFMT == S_IFLNK {
        return Err(err(Errno::EOPNOTSUPP));
    }
    let proc = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let mode = Mode::from_raw_mode(mode);
    match rustix::fs::chmod(proc.as_str(), mode) {
        Err(rustix::io::Errno::NOENT) => Ok(rustix::fs::chmodat(dfd, name, mode, HostAt::empty())?),
        r => Ok(r?),
    }
}

/// Opens the file `name` in the directory `dfd` for reading, not following a symlink.
fn open_read<'t, V: Variant>(t: &'t Task<V>, dfd: Fd, name: &[u8]) -> io::Result<OwnedFd<'t, V>> {
    let flags = OpenFlags::RDONLY | OpenFlags::NOFOLLOW | OpenFlags::CLOEXEC;
    Ok(OwnedFd::new(t, t.openat(dfd, name, flags, 0)?))
}

/// Creates the regular file `rp` beneath `dfd` for writing (mode 0600 until its attributes
/// are set); `EEXIST` if the name exists.
fn create_new<'t, V: Variant>(t: &'t Task<V>, dfd: Fd, rp: &[u8]) -> io::Result<OwnedFd<'t, V>> {
    let flags = OpenFlags::CREAT | OpenFlags::EXCL | OpenFlags::WRONLY | OpenFlags::CLOEXEC;
    Ok(OwnedFd::new(t, t.openat(dfd, rp, flags, 0o600)?))
}

/// `lseek` on a host file, errno as uvfs's.
fn host_seek(f: &std::fs::File, off: u64, whence: i32) -> Result<u64, Errno> {
    let pos = match whence {
        SEEK_DATA => rustix::fs::SeekFrom::Data(off),
        _ => rustix::fs::SeekFrom::Hole(off),
    };
    rustix::fs::seek(f, pos).map_err(|e| Errno::from_raw(e.raw_os_error()).unwrap_or(Errno::EIO))
}

fn host_attrs(st: &rustix::fs::Stat) -> Attrs {
    let a = fs_attrs(st);
    Attrs {
        mode: a.mode,
        uid: a.uid,
        gid: a.gid,
        atime: a.times[0],
        mtime: a.times[1],
    }
}

fn uvfs_attrs(st: &Stat) -> Attrs {
    Attrs {
        mode: st.st_mode,
        uid: st.st_uid,
        gid: st.st_gid,
        atime: st.st_atime,
        mtime: st.st_mtime,
    }
}

/// The attributes `a` of the directory `rp` copied beneath `dst` (`""`: `dst` itself),
/// applied once its contents are in (callers go children first).
#[cfg(feature = "tar")]
fn set_dir_attrs<V: Variant>(
    dst: &Dir<'_, V>,
    rp: &[u8],
    a: Attrs,
    stats: &mut CopyStats,
) -> io::Result<()> {
    let t = dst.task();
    if rp.is_empty() {
        set_uvfs_attrs(t, dst.fd(), b"", a, false, stats)
    } else {
        let (p, name) = dst.parent_nofollow(rp)?;
        set_uvfs_attrs(t, p.fd(), name, a, false, stats)
    }
}

/// Owner (when permitted), mode (not for a symlink) and times of `rp` in the directory
/// `dfd` (`""`: `dfd` itself).
fn set_uvfs_attrs<V: Variant>(
    t: &Task<V>,
    dfd: Fd,
    rp: &[u8],
    a: Attrs,
    symlink: bool,
    stats: &mut CopyStats,
) -> io::Result<()> {
    let (path, flags): (&[u8], AtFlags) = if rp.is_empty() {
        (b"", AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW)
    } else {
        (rp, AtFlags::SYMLINK_NOFOLLOW)
    };
    let cred = t.cred();
    if cred.capable(crate::Caps::CHOWN) {
        // Always (a setgid directory may have given the new entry another group).
        t.fchownat(dfd, path, a.uid, a.gid, flags)?;
    } else if (a.uid, a.gid) != (cred.uid, cred.gid) {
        stats.owners_not_kept += 1;
    }
    if !symlink {
        // AT_SYMLINK_NOFOLLOW too (fchmodat2): a symlink swapped in meanwhile gives
        // EOPNOTSUPP instead of a chmod of whatever it names.
        t.fchmodat(dfd, path, a.mode & 0o7777, flags)?;
    }
    t.utimensat(dfd, path, Some(&[a.atime, a.mtime]), flags)?;
    Ok(())
}

/// As [`set_uvfs_attrs`] on `name` in the host directory `dfd` (`CWD` and a path for the
/// root).
fn set_host_attrs(
    dfd: impl AsFd,
    name: &Path,
    a: Attrs,
    symlink: bool,
    root: bool,
    stats: &mut CopyStats,
) -> io::Result<()> {
    use rustix::fs::{Gid, Timespec as HostTs, Timestamps, Uid};
    let m = rustix::fs::statat(&dfd, name, HostAt::SYMLINK_NOFOLLOW)?;
    if (a.uid, a.gid) != (m.st_uid, m.st_gid) {
        if root {
            let (uid, gid) = (Uid::from_raw(a.uid), Gid::from_raw(a.gid));
            rustix::fs::chownat(&dfd, name, Some(uid), Some(gid), HostAt::SYMLINK_NOFOLLOW)?;
        } else {
            stats.owners_not_kept += 1;
        }
    }
    if !symlink {
        host_chmod_nofollow(&dfd, name, a.mode & 0o7777)?;
    }
    let ts = |t: Timespec| HostTs {
        tv_sec: t.tv_sec,
        tv_nsec: t.tv_nsec as _,
    };
    rustix::fs::utimensat(
        &dfd,
        name,
        &Timestamps {
            last_access: ts(a.atime),
            last_modification: ts(a.mtime),
        },
        HostAt::SYMLINK_NOFOLLOW,
    )?;
    Ok(())
}

/// A tar path (from an archive) as a relative path beneath the destination: `None` for an
/// absolute path or one with `..` (it would leave the destination), or an empty one.
#[cfg(feature = "tar")]
fn tar_rel(p: &Path) -> Option<Vec<u8>> {
    use std::path::Component;
    let mut out = Vec::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => {
                if !out.is_empty() {
                    out.push(b'/');
                }
                out.extend_from_slice(n.as_bytes());
            }
            Component::CurDir => {}
            Component::RootDir | Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    (!out.is_empty()).then_some(out)
}

/// A tar header's attributes (atime = mtime: ustar has none). Out-of-range numbers are
/// `InvalidData`, not wrapped (a uid of 2^32 must not become root's 0).
#[cfg(feature = "tar")]
fn tar_attrs(h: &tar::Header, path: &Path) -> io::Result<Attrs> {
    let range = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("tar entry {}: {what} out of range", path.display()),
        )
    };
    let mtime = Timespec::new(i64::try_from(h.mtime()?).map_err(|_| range("mtime"))?, 0);
    Ok(Attrs {
        mode: h.mode()?,
        uid: u32::try_from(h.uid()?).map_err(|_| range("uid"))?,
        gid: u32::try_from(h.gid()?).map_err(|_| range("gid"))?,
        atime: mtime,
        mtime,
    })
}

/// Makes the missing ancestors of `rel` beneath `dst` (mode 0755 less the umask), each in
/// its parent opened without following symlinks.
#[cfg(feature = "tar")]
fn make_parents<V: Variant>(dst: &Dir<'_, V>, rel: &[u8], stats: &mut CopyStats) -> io::Result<()> {
    let t = dst.task();
    for (i, _) in rel.iter().enumerate().filter(|&(_, &c)| c == b'/') {
        let (p, name) = dst.parent_nofollow(&rel[..i])?;
        match t.mkdirat(p.fd(), name, 0o755) {
            Ok(()) => stats.dirs += 1,
            Err(Errno::EEXIST) => {}
            Err(e) => return Err(err(e)),
        }
    }
    Ok(())
}

#[cfg(feature = "tar")]
impl<'t, V: Variant> Dir<'t, V> {
    /// Unpacks the tar archive read from `archive` into the directory `to` beneath this
    /// one (made with its parents if missing), as `tar -x -p` (the `tar` crate reads ustar,
    /// GNU and PAX archives): directories, files, symlinks, hard links, FIFOs and device
    /// nodes; permission bits, owners (when this task is root) and modification times (a
    /// directory's after its contents). A directory the archive names twice is kept; any
    /// other existing name is `EEXIST`.
    ///
    /// # Errors
    /// `InvalidData` (no errno) for an entry whose path is absolute, contains `..` or is
    /// empty, or a hard link to such a path (nothing is written outside `to`), and for a
    /// malformed archive; `EEXIST`, `ENOTDIR`, `ENOSPC`, `EPERM` (a device node when not
    /// root) from uvfs; the reader's errors. What was unpacked before the error stays.
    pub fn unpack_tar(
        &self,
        archive: impl io::Read,
        to: impl AsRef<Path>,
    ) -> io::Result<CopyStats> {
        let mut stats = CopyStats::default();
        let dst = self.dest_dir(to.as_ref(), &mut stats)?;
        let t = self.task();
        let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
        let mut dirs: Vec<(Vec<u8>, Attrs)> = Vec::new();
        let mut ar = tar::Archive::new(archive);
        for e in ar.entries()? {
            let mut e = e?;
            let path = e.path()?.into_owned();
            let Some(rp) = tar_rel(&path) else {
                // `./` (the archive's root): a directory entry's attributes go to the
                // destination itself, applied last with the other directories'.
                if path
                    .components()
                    .all(|c| matches!(c, std::path::Component::CurDir))
                {
                    let h = e.header();
                    if h.entry_type() == tar::EntryType::Directory {
                        let a = tar_attrs(h, &path)?;
                        dirs.retain(|(p, _)| !p.is_empty());
                        dirs.insert(0, (Vec::new(), a));
                    }
                    continue;
                }
                return Err(bad(format!(
                    "tar entry {} leaves the destination",
                    path.display()
                )));
            };
            let h = e.header();
            let a = tar_attrs(h, &path)?;
            let kind = h.entry_type();
            // The entry's parent, opened without following symlinks: an archive that makes
            // `a -> /` and then `a/x` gets ELOOP, not a file outside the destination.
            let (p, name) = match dst.parent_nofollow(&rp) {
                Ok(x) => x,
                // An archive without directory entries (`tar cf x.tar a/b/f`), or with a
                // file before its directory: the missing parents are made, as tar(1) does.
                Err(x) if x.raw_os_error() == Some(Errno::ENOENT.raw()) => {
                    make_parents(&dst, &rp, &mut stats)?;
                    dst.parent_nofollow(&rp)?
                }
                Err(x) => return Err(x),
            };
            let pfd = p.fd();
            use tar::EntryType as E;
            match kind {
                E::Directory => {
                    match t.mkdirat(pfd, name, 0o700) {
                        Ok(()) => {
                            stats.dirs += 1;
                            dirs.push((rp, a));
                        }
                        // Named again (or made as a parent): the later entry's attributes
                        // win, as with tar(1).
                        Err(Errno::EEXIST)
                            if t.fstatat(pfd, name, AtFlags::SYMLINK_NOFOLLOW)?.is_dir() =>
                        {
                            match dirs.iter_mut().find(|(p, _)| *p == rp) {
                                Some(d) => d.1 = a,
                                None => dirs.push((rp, a)),
                            }
                        }
                        Err(x) => return Err(err(x)),
                    }
                    continue;
                }
                E::Regular | E::Continuous | E::GNUSparse => {
                    let mut w = create_new(t, pfd, name)?;
                    stats.bytes += io::copy(&mut e, &mut w)?;
                    stats.files += 1;
                }
                E::Symlink => {
                    let target = e.link_name()?.ok_or_else(|| {
                        bad(format!("symlink {} without a target", path.display()))
                    })?;
                    t.symlinkat(target.as_os_str().as_bytes(), pfd, name)?;
                    stats.symlinks += 1;
                }
                E::Link => {
                    let target = e.link_name()?.and_then(|p| tar_rel(&p)).ok_or_else(|| {
                        bad(format!(
                            "hard link {} to a path outside the destination",
                            path.display()
                        ))
                    })?;
                    let (tp, tname) = dst.parent_nofollow(&target)?;
                    t.linkat(tp.fd(), tname, pfd, name, AtFlags::empty())?;
                    stats.hard_links += 1;
                    // A hard link carries no attributes of its own.
                    continue;
                }
                E::Fifo | E::Char | E::Block => {
                    let ft = match kind {
                        E::Fifo => S_IFIFO,
                        E::Char => S_IFCHR,
                        _ => S_IFBLK,
                    };
                    // A FIFO's device fields may be blank (GNU tar leaves them so).
                    let (maj, min) = if kind == E::Fifo {
                        (0, 0)
                    } else {
                        (
                            u64::from(h.device_major()?.unwrap_or(0)),
                            u64::from(h.device_minor()?.unwrap_or(0)),
                        )
                    };
                    // glibc's makedev.
                    let dev = ((maj & 0xfff) << 8)
                        | ((maj & !0xfff) << 32)
                        | (min & 0xff)
                        | ((min & !0xff) << 12);
                    t.mknodat(pfd, name, ft | 0o600, dev)?;
                    stats.nodes += 1;
                }
                // PAX and GNU extension headers are read by the `tar` crate itself; other
                // kinds have nothing to create.
                _ => continue,
            }
            set_uvfs_attrs(t, pfd, name, a, kind == E::Symlink, &mut stats)?;
        }
        for (rp, a) in dirs.iter().rev() {
            set_dir_attrs(&dst, rp, *a, &mut stats)?;
        }
        Ok(stats)
    }

    /// Writes the tree `from` beneath this directory as a tar archive (GNU format, paths
    /// relative to `from`, long names as GNU long-name entries) to `archive`, as
    /// `tar -c -C from .`: directories, files, symlinks, hard links (one entry with the
    /// data, later names as links), FIFOs and device nodes, with permission bits, owners
    /// and modification times (whole seconds, as ustar keeps them). Holes are written as
    /// zeros (tar has no holes without the GNU sparse format).
    ///
    /// # Errors
    /// `ENOTDIR` if `from` is not a directory; uvfs's errors reading; the writer's.
    pub fn pack_tar<W: io::Write>(&self, from: impl AsRef<Path>, archive: W) -> io::Result<W> {
        let src = self.open_dir(from.as_ref())?;
        let t = self.task();
        let mut b = tar::Builder::new(archive);
        let mut links: HashMap<(u64, u64), PathBuf> = HashMap::new();
        let mut buf = vec![0u8; CHUNK];
        // Pre-order, as tar(1) writes: a directory's entry, then at once its contents (an
        // extractor restores a directory's times once it has left it). Per level: the
        // directory's path and its remaining names, in name order (a stable archive).
        let list = |rel: &[u8]| -> io::Result<std::vec::IntoIter<std::ffi::OsString>> {
            let listing = if rel.is_empty() {
                src.entries()?
            } else {
                src.read_dir(OsStr::from_bytes(rel))?
            };
            let mut names: Vec<_> = listing
                .map(|e| e.map(|e| e.file_name()))
                .collect::<io::Result<_>>()?;
            names.sort();
            Ok(names.into_iter())
        };
        // The root first, as `tar -c -C from .` writes `./` (its attributes travel).
        let root = src.dir_metadata()?;
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(root.mode() & 0o7777);
        h.set_uid(u64::from(root.uid()));
        h.set_gid(u64::from(root.gid()));
        h.set_mtime(root.stat().st_mtime.tv_sec.max(0) as u64);
        h.set_size(0);
        b.append_data(&mut h, "./", io::empty())?;
        let mut stack = vec![(Vec::new(), list(b"")?)];
        while let Some((rel, names)) = stack.last_mut() {
            let Some(name) = names.next() else {
                stack.pop();
                continue;
            };
            let rel = rel.clone();
            {
                let rp = join(&rel, name.as_bytes());
                let path = PathBuf::from(OsStr::from_bytes(&rp));
                let (p, name) = src.parent_nofollow(&rp)?;
                let pfd = p.fd();
                let st = t.fstatat(pfd, name, AtFlags::SYMLINK_NOFOLLOW)?;
                let ft = st.st_mode & S_IFMT;
                let mut h = tar::Header::new_gnu();
                h.set_mode(st.st_mode & 0o7777);
                h.set_uid(u64::from(st.st_uid));
                h.set_gid(u64::from(st.st_gid));
                h.set_mtime(st.st_mtime.tv_sec.max(0) as u64);
                h.set_size(0);
                use tar::EntryType as E;
                match ft {
                    S_IFDIR => {
                        h.set_entry_type(E::Directory);
                        b.append_data(&mut h, &path, io::empty())?;
                        let names = list(&rp)?;
                        stack.push((rp, names));
                    }
                    S_IFREG => {
                        if st.st_nlink > 1 {
                            if let Some(first) = links.get(&(st.st_dev, st.st_ino)) {
                                h.set_entry_type(E::Link);
                                b.append_link(&mut h, &path, first)?;
                                continue;
                            }
                            links.insert((st.st_dev, st.st_ino), path.clone());
                        }
                        let fd = open_read(t, pfd, name)?;
                        h.set_entry_type(E::Regular);
                        h.set_size(st.st_size as u64);
                        // Exactly st_size bytes, even if the file changes meanwhile (tar
                        // needs the size it announced).
                        let size = st.st_size as u64;
                        let data = io::Read::take(
                            io::Read::chain(io::Read::take(fd, size), io::repeat(0)),
                            size,
                        );
                        b.append_data(&mut h, &path, data)?;
                    }
                    S_IFLNK => {
                        let n = t.readlinkat(pfd, name, &mut buf)?;
                        h.set_entry_type(E::Symlink);
                        b.append_link(&mut h, &path, OsStr::from_bytes(&buf[..n]))?;
                    }
                    _ => {
                        h.set_entry_type(match ft {
                            S_IFIFO => E::Fifo,
                            S_IFCHR => E::Char,
                            S_IFBLK => E::Block,
                            // A socket has no tar form (GNU tar skips them too).
                            _ => continue,
                        });
                        let dev = st.st_rdev;
                        let maj = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
                        let min = (dev & 0xff) | ((dev >> 12) & !0xff);
                        h.set_device_major(maj as u32)?;
                        h.set_device_minor(min as u32)?;
                        b.append_data(&mut h, &path, io::empty())?;
                    }
                }
            }
        }
        b.into_inner()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A walk down a chain 5 windows deep and back: at most `HELD_LEVELS + 1` levels held
    /// at any time, each level climbed back to reopened with its own identity, and the
    /// reopening costs one walk from the root per window, not one per level.
    #[test]
    fn levels_hold_a_window_and_reopen_by_name() {
        let depth = 5 * HELD_LEVELS + 3;
        let opens = Cell::new(0usize);
        // A "descriptor" is the level number; a level's identity is (level, 0).
        let open = |p: &usize, name: &[u8]| -> io::Result<(usize, Id)> {
            opens.set(opens.get() + 1);
            assert_eq!(name, (p + 1).to_string().as_bytes());
            Ok((p + 1, ((p + 1) as u64, 0)))
        };
        let mut l = Levels::new(0usize, (0, 0), open);
        let mut names = vec![Vec::new()];
        let held = |l: &Levels<usize, _>| l.fds.iter().filter(|f| f.is_some()).count();
        for i in 1..=depth {
            l.push(i, (i as u64, 0));
            names.push(i.to_string().into_bytes());
            assert!(held(&l) <= HELD_LEVELS + 1);
        }
        for i in (1..depth).rev() {
            l.pop();
            names.pop();
            l.ensure_top(&names).unwrap();
            assert_eq!(*l.top().unwrap(), i);
            assert!(held(&l) <= HELD_LEVELS + 1, "at {i}");
        }
        // One walk per window above the first (the root's chain to each window's top).
        assert!(
            opens.get() <= depth * depth / HELD_LEVELS,
            "{} opens",
            opens.get()
        );
        // A path's directory opened from the deepest held level on it.
        let comps: Vec<Vec<u8>> = (1..=3).map(|i: usize| i.to_string().into_bytes()).collect();
        let comps: Vec<&[u8]> = comps.iter().map(|c| c.as_slice()).collect();
        assert_eq!(*l.open_path(&names, &comps).unwrap().get(), 3);
    }

    /// A level reopened by name that is another directory now is an error, not a copy
    /// into (or from) the wrong place.
    #[test]
    fn a_replaced_level_is_refused() {
        let open = |p: &usize, _: &[u8]| -> io::Result<(usize, Id)> { Ok((p + 1, (99, 0))) };
        let mut l = Levels::new(0usize, (0, 0), open);
        let mut names = vec![Vec::new()];
        for i in 1..=HELD_LEVELS + 2 {
            l.push(i, (i as u64, 0));
            names.push(b"d".to_vec());
        }
        // Down to level 2, closed when level `HELD_LEVELS + 2` was entered.
        while l.fds.len() > 3 {
            l.pop();
            names.pop();
        }
        assert!(l.fds[2].is_none());
        let e = l.ensure_top(&names).unwrap_err();
        assert_eq!(e.to_string(), "replaced while being copied");
    }
}
