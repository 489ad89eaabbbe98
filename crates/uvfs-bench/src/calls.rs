//! The calls the workloads make, as one trait that every target spells in its own way:
//! [`Calls`]. The workloads themselves ([`crate::loops`]) are written once over it, so a
//! target differs in how it makes a call (uvfs's `Task`, rustix, another crate's API), never
//! in which calls it makes or in what order (STYLE.md section 9).
//!
//! Linux analogue: none; this is the benchmark's own seam (what a syscall table is to a
//! test program: the same calls, whoever answers them).
//!
//! Implementations: `UvfsCalls` (uvfs_target.rs, a `Task` per thread), `KernelCalls`
//! (kernel.rs: rustix on the host, which also serves the `mount`, `mount-uvfs-perms`,
//! `passthrough-ll`, `run` and `proot` targets, the kernel on another directory), and the
//! peers' (peers/, feature `peers`), which answer [`Unsupported`] for a call their crate
//! does not have.
//!
//! Invariants: every method is one call of the target's (no retries, no caching); the hot
//! loops call them through generics (`Loop<C: Calls>`), so each call is statically
//! dispatched and inlined as if written out by hand.

use std::ffi::CStr;

use crate::error::{Error, Result};
use crate::workloads::NameBuf;

/// How a workload opens a file: the two `open` flag sets the workloads use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// `O_RDONLY`.
    Read,
    /// `O_CREAT | O_WRONLY | O_TRUNC`, mode [`FILE_MODE`](crate::workloads::FILE_MODE)
    /// (0644, before the umask): AIM7 creat-clo's `creat`.
    CreateTrunc,
}

/// What the workloads check of a `stat`: the mode and the size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// `st_mode`: file type ([`S_IFMT`](crate::workloads::S_IFMT) bits) and permissions.
    pub mode: u32,
    /// `st_size`, bytes.
    pub size: i64,
}

/// A target's path argument: `[u8]` (uvfs), `CStr` (the kernel), `str` (vfs-memoryfs),
/// `Path` (wasmer-memfs).
pub trait PathArg {
    /// The current name of `names` (creat-clo's `t<thread>-<k>`) as this path type.
    fn from_name(names: &NameBuf) -> &Self;

    /// The path for an error message (lossy where it is not UTF-8).
    fn show(&self) -> String;
}

impl PathArg for [u8] {
    #[inline]
    fn from_name(names: &NameBuf) -> &[u8] {
        names.name()
    }

    #[cold]
    fn show(&self) -> String {
        String::from_utf8_lossy(self).into_owned()
    }
}

impl PathArg for CStr {
    #[inline]
    fn from_name(names: &NameBuf) -> &CStr {
        names.c_name()
    }

    #[cold]
    fn show(&self) -> String {
        self.to_string_lossy().into_owned()
    }
}

impl PathArg for str {
    #[inline]
    fn from_name(names: &NameBuf) -> &str {
        names.str_name()
    }

    #[cold]
    fn show(&self) -> String {
        self.to_owned()
    }
}

impl PathArg for std::path::Path {
    #[inline]
    fn from_name(names: &NameBuf) -> &std::path::Path {
        std::path::Path::new(names.str_name())
    }

    #[cold]
    fn show(&self) -> String {
        self.display().to_string()
    }
}

/// The error of a call a target does not have (a peer without `dup`, say), shown as
/// "unsupported: the target has no dup". A target that lacks a workload's call also says
/// so in [`Target::supports`](crate::target::Target::supports), so the harness skips the
/// workload there instead of failing the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsupported(pub &'static str);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unsupported: the target has no {}", self.0)
    }
}

impl std::error::Error for Unsupported {}

/// One worker thread's calls, as a target makes them: `&self` is the thread's own context
/// (uvfs: its `Task`; the kernel: nothing but what `enter` set up; a peer: its handle on the
/// file system). Created by the target's `setup` on the main thread, then moved to and used
/// on the worker's thread only.
///
/// Descriptors come in two kinds: [`Calls::At`], one the run opened for the workers (the
/// shared file, the run's or the tree's directory), which a workload uses but never closes;
/// and [`Calls::Fd`], one a workload's call returned, which it closes with
/// [`Calls::close`] (or, for `tree`, reads first).
///
/// Every call returns the target's own error ([`Calls::Error`]); the loops add the context
/// (which target, which workload, which call) on the error path only.
pub trait Calls: Send {
    /// A descriptor a call returned (uvfs `Fd`, the kernel's `OwnedFd`).
    type Fd;
    /// A descriptor the run opened for the workers, passed by value (uvfs `Fd`, the
    /// kernel's `BorrowedFd<'_>`); `Send`, as the loops holding it move to their threads.
    type At: Copy + Send;
    /// A path argument.
    type Path: PathArg + ?Sized;
    /// `futimens`'s argument: atime and mtime, prepared once by [`Calls::times`].
    type Times: Send;
    /// The target's error (an errno, or [`Unsupported`]).
    type Error: std::error::Error + Send + Sync + 'static;

    /// Called on the worker's thread before the start barrier (the kernel's `unshare` of
    /// the fd table, its `fchdir`); not timed.
    ///
    /// # Errors
    ///
    /// The set-up call failed, with context.
    fn enter(&mut self) -> Result<()> {
        Ok(())
    }

    /// `futimens`'s argument setting atime and mtime both to `(seconds, nanoseconds)`.
    fn times(t: (i64, i64)) -> Self::Times;

    /// `dup(fd)`: a new descriptor for the same open file.
    ///
    /// # Errors
    ///
    /// The target's errno (`EBADF`, `EMFILE`), or [`Unsupported`].
    fn dup(&self, fd: Self::At) -> std::result::Result<Self::Fd, Self::Error>;

    /// `close(fd)`.
    ///
    /// # Errors
    ///
    /// The target's errno (`EBADF`); the kernel's `close` reports none (as UnixBench, it
    /// ignores the result of closing a descriptor it just got).
    fn close(&self, fd: Self::Fd) -> std::result::Result<(), Self::Error>;

    /// `getpid()`.
    ///
    /// # Errors
    ///
    /// [`Unsupported`] where the target has no processes (the peers).
    fn getpid(&self) -> std::result::Result<u32, Self::Error>;

    /// `getuid()`.
    ///
    /// # Errors
    ///
    /// [`Unsupported`] where the target has no credentials (the peers).
    fn getuid(&self) -> std::result::Result<u32, Self::Error>;

    /// `umask(mask)`: the old mask.
    ///
    /// # Errors
    ///
    /// [`Unsupported`] where the target has no umask (the peers).
    fn umask(&self, mask: u32) -> std::result::Result<u32, Self::Error>;

    /// `openat(dir, path, how)`; `dir` `None`: relative to the thread's cwd (`AT_FDCWD`).
    ///
    /// # Errors
    ///
    /// The target's errno (`ENOENT`, `EEXIST`, `EMFILE`, ...).
    fn openat(
        &self,
        dir: Option<Self::At>,
        path: &Self::Path,
        how: Open,
    ) -> std::result::Result<Self::Fd, Self::Error>;

    /// `unlinkat(dir, path, 0)`.
    ///
    /// # Errors
    ///
    /// The target's errno (`ENOENT`, `EISDIR`, ...).
    fn unlinkat(&self, dir: Self::At, path: &Self::Path) -> std::result::Result<(), Self::Error>;

    /// `fstat(fd)`.
    ///
    /// # Errors
    ///
    /// The target's errno (`EBADF`), or [`Unsupported`].
    fn fstat(&self, fd: Self::At) -> std::result::Result<Stat, Self::Error>;

    /// `fstatat(dir, path, 0)`; `dir` `None`: relative to the cwd.
    ///
    /// # Errors
    ///
    /// The target's errno (`ENOENT`, `ENOTDIR`, ...).
    fn fstatat(
        &self,
        dir: Option<Self::At>,
        path: &Self::Path,
    ) -> std::result::Result<Stat, Self::Error>;

    /// `read(fd, buf)` at the file position: bytes read, 0 at the end.
    ///
    /// # Errors
    ///
    /// The target's errno (`EIO`, ...).
    fn read(&self, fd: &mut Self::Fd, buf: &mut [u8]) -> std::result::Result<usize, Self::Error>;

    /// `pread(fd, buf, off)`: bytes read at byte offset `off`.
    ///
    /// # Errors
    ///
    /// The target's errno (`EBADF`, `EIO`).
    fn pread(
        &self,
        fd: Self::At,
        buf: &mut [u8],
        off: u64,
    ) -> std::result::Result<usize, Self::Error>;

    /// `futimens(fd, times)`.
    ///
    /// # Errors
    ///
    /// The target's errno (`EBADF`, `EPERM`), or [`Unsupported`].
    fn futimens(&self, fd: Self::At, times: &Self::Times) -> std::result::Result<(), Self::Error>;
}

/// The error of `call` (shown as `<who> <workload>: <call>`) failing with `e`; out of line,
/// so that the loops' success path carries no formatting.
#[cold]
#[inline(never)]
pub(crate) fn failed(
    who: &str,
    workload: &str,
    call: std::fmt::Arguments<'_>,
    e: impl std::error::Error + Send + Sync + 'static,
) -> Error {
    Error::new(format!("{who} {workload}: {call}"), e)
}

/// A workload's check failed (`<who> <workload>: <what>`); out of line, as [`failed`].
#[cold]
#[inline(never)]
pub(crate) fn wrong(who: &str, workload: &str, what: std::fmt::Arguments<'_>) -> Error {
    Error::msg(format!("{who} {workload}: {what}"))
}
