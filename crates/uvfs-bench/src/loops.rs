//! The workloads' loops, each written once over [`Calls`]: one [`Worker`] per workload,
//! generic over the target's calls, so that every target makes the same calls in the same
//! order and checks the same results (the rates compare because the loops are the same
//! code; STYLE.md section 9). The conflict audit (`audit.rs`) runs these same loops.
//!
//! Linux analogue: none; the loops are the benchmarks' own (UnixBench `syscall`, AIM7
//! creat-clo, will-it-scale, the kernel patches' tests; see
//! [`WorkloadKind`](crate::workloads::WorkloadKind)).
//!
//! A target's `setup` prepares the shared state (the run's directory, the shared file as
//! [`Calls::At`]) and builds one loop per thread with that thread's [`Calls`]; the harness
//! calls [`Worker::run`] through `dyn Worker` once per batch, and inside `run` every call
//! is statically dispatched (`C` is a type parameter, not a trait object), so a batch costs
//! what the loop written out by hand for that target would.
//!
//! Invariants: each loop is `#[repr(align(128))]` (it writes its own fields while running;
//! see [`Worker`]); an error's context (`<target> <workload>: <call>`) is built only on the
//! error path (`calls::failed`, out of line).

use std::hint::black_box;

use crate::calls::{failed, wrong, Calls, Open, PathArg, Stat};
use crate::error::Result;
use crate::target::Worker;
use crate::workloads::{
    read_shared_offset, shared_byte, NameBuf, ReadBuf, FUTIMES_TIMES, READ_SHARED_LEN,
    SHARED_FILE_SIZE, S_IFMT, S_IFREG,
};

/// `syscall` (UnixBench "System Call Overhead"): `close(dup(fd)); getpid(); getuid();
/// umask(022)` per loop, `fd` the shared file (fd 0 after fork).
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
pub struct Syscall<C: Calls> {
    /// The target's name, for errors.
    who: String,
    /// This thread's calls.
    calls: C,
    /// The shared file.
    fd: C::At,
}

impl<C: Calls> Syscall<C> {
    /// The loop of target `who` with `calls` on the shared file `fd`.
    pub fn new(who: &str, calls: C, fd: C::At) -> Self {
        Syscall {
            who: who.to_owned(),
            calls,
            fd,
        }
    }
}

impl<C: Calls> Worker for Syscall<C> {
    fn enter(&mut self) -> Result<()> {
        self.calls.enter()
    }

    fn run(&mut self, n: u32) -> Result<()> {
        const W: &str = "syscall";
        let (c, who) = (&self.calls, self.who.as_str());
        for _ in 0..n {
            let fd = c
                .dup(self.fd)
                .map_err(|e| failed(who, W, format_args!("dup(0)"), e))?;
            c.close(fd)
                .map_err(|e| failed(who, W, format_args!("close(dup(0))"), e))?;
            black_box(
                c.getpid()
                    .map_err(|e| failed(who, W, format_args!("getpid"), e))?,
            );
            black_box(
                c.getuid()
                    .map_err(|e| failed(who, W, format_args!("getuid"), e))?,
            );
            black_box(
                c.umask(0o022)
                    .map_err(|e| failed(who, W, format_args!("umask"), e))?,
            );
        }
        Ok(())
    }
}

/// `creat-clo` (AIM7): create a fresh name `t<thread>-<k>` in the shared directory
/// ([`Open::CreateTrunc`]), close it, unlink it.
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
pub struct CreatClo<C: Calls> {
    /// The target's name, for errors.
    who: String,
    /// This thread's calls.
    calls: C,
    /// The run's directory.
    dir: C::At,
    /// This thread's file names.
    names: NameBuf,
}

impl<C: Calls> CreatClo<C> {
    /// The loop of target `who` with `calls` in directory `dir`, as thread `thread`.
    pub fn new(who: &str, calls: C, dir: C::At, thread: usize) -> Self {
        CreatClo {
            who: who.to_owned(),
            calls,
            dir,
            names: NameBuf::new(thread),
        }
    }
}

impl<C: Calls> Worker for CreatClo<C> {
    fn enter(&mut self) -> Result<()> {
        self.calls.enter()
    }

    fn run(&mut self, n: u32) -> Result<()> {
        const W: &str = "creat-clo";
        let (c, who) = (&self.calls, self.who.as_str());
        for _ in 0..n {
            self.names.advance();
            let name = C::Path::from_name(&self.names);
            let fd = c
                .openat(Some(self.dir), name, Open::CreateTrunc)
                .map_err(|e| failed(who, W, format_args!("open({})", name.show()), e))?;
            c.close(fd)
                .map_err(|e| failed(who, W, format_args!("close({})", name.show()), e))?;
            c.unlinkat(self.dir, name)
                .map_err(|e| failed(who, W, format_args!("unlink({})", name.show()), e))?;
        }
        Ok(())
    }
}

/// `futimes` (the FUSE `request_end` patch's test): `futimens(fd, t1); futimens(fd, t2)`
/// per loop on the shared file ([`FUTIMES_TIMES`]).
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
pub struct Futimes<C: Calls> {
    /// The target's name, for errors.
    who: String,
    /// This thread's calls.
    calls: C,
    /// The shared file.
    fd: C::At,
    /// The two (atime, mtime) settings, set alternately.
    times: [C::Times; 2],
}

impl<C: Calls> Futimes<C> {
    /// The loop of target `who` with `calls` on the shared file `fd`.
    pub fn new(who: &str, calls: C, fd: C::At) -> Self {
        Futimes {
            who: who.to_owned(),
            calls,
            fd,
            times: FUTIMES_TIMES.map(C::times),
        }
    }
}

impl<C: Calls> Worker for Futimes<C> {
    fn enter(&mut self) -> Result<()> {
        self.calls.enter()
    }

    fn run(&mut self, n: u32) -> Result<()> {
        const W: &str = "futimes";
        let (c, who) = (&self.calls, self.who.as_str());
        for _ in 0..n {
            c.futimens(self.fd, &self.times[0])
                .map_err(|e| failed(who, W, format_args!("futimens(t1)"), e))?;
            c.futimens(self.fd, &self.times[1])
                .map_err(|e| failed(who, W, format_args!("futimens(t2)"), e))?;
        }
        Ok(())
    }
}

/// `tree` (kernbench-like): per regular file of the imported tree, in this thread's
/// order, `fstatat` (a regular file?), `openat`, `read` to the end with a 64 KiB buffer,
/// `close`, and the bytes read checked against `st_size` and the host's size.
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
pub struct Tree<'a, C: Calls, P> {
    /// The target's name, for errors.
    who: String,
    /// This thread's calls.
    calls: C,
    /// The tree's directory.
    dir: C::At,
    /// Regular files, relative to `dir`.
    paths: &'a [P],
    /// Their sizes on the host.
    sizes: &'a [u64],
    /// This thread's order over `paths` ([`thread_order`](crate::workloads::thread_order)).
    order: Vec<u32>,
    /// Next index into `order`.
    pos: usize,
    /// The read buffer.
    buf: Box<ReadBuf>,
}

impl<'a, C: Calls, P> Tree<'a, C, P> {
    /// The loop of target `who` with `calls` over `paths` (relative to `dir`, of the host
    /// sizes `sizes`), as thread `thread`.
    pub fn new(
        who: &str,
        calls: C,
        dir: C::At,
        paths: &'a [P],
        sizes: &'a [u64],
        thread: usize,
    ) -> Self {
        Tree {
            who: who.to_owned(),
            calls,
            dir,
            paths,
            sizes,
            order: crate::workloads::thread_order(paths.len(), thread),
            pos: 0,
            buf: ReadBuf::boxed(),
        }
    }
}

impl<C: Calls, P: AsRef<C::Path> + Sync> Worker for Tree<'_, C, P> {
    fn enter(&mut self) -> Result<()> {
        self.calls.enter()
    }

    fn run(&mut self, n: u32) -> Result<()> {
        const W: &str = "tree";
        let (c, who) = (&self.calls, self.who.as_str());
        for _ in 0..n {
            let Some(&i) = self.order.get(self.pos) else {
                return Err(wrong(who, W, format_args!("no files to read")));
            };
            let i = i as usize;
            self.pos = (self.pos + 1) % self.order.len();
            let path = self.paths[i].as_ref();
            let st = c
                .fstatat(Some(self.dir), path)
                .map_err(|e| failed(who, W, format_args!("fstatat({})", path.show()), e))?;
            regular_file(who, W, path, st)?;
            let mut fd = c
                .openat(Some(self.dir), path, Open::Read)
                .map_err(|e| failed(who, W, format_args!("open({})", path.show()), e))?;
            let mut total = 0u64;
            loop {
                let got = c
                    .read(&mut fd, &mut self.buf.0)
                    .map_err(|e| failed(who, W, format_args!("read({})", path.show()), e))?;
                if got == 0 {
                    break;
                }
                total += got as u64;
            }
            c.close(fd)
                .map_err(|e| failed(who, W, format_args!("close({})", path.show()), e))?;
            if total != self.sizes[i] || total as i64 != st.size {
                return Err(wrong(
                    who,
                    W,
                    format_args!(
                        "{}: read {total} bytes, st_size {}, host size {}",
                        path.show(),
                        st.size,
                        self.sizes[i]
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// `fstat-shared` (will-it-scale, the `file_ref_t` patch's test): `fstat(fd)` on the
/// shared file, checked a regular file of [`SHARED_FILE_SIZE`] bytes.
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
pub struct FstatShared<C: Calls> {
    /// The target's name, for errors.
    who: String,
    /// This thread's calls (a thread sharing the run's descriptor table).
    calls: C,
    /// The shared file.
    fd: C::At,
}

impl<C: Calls> FstatShared<C> {
    /// The loop of target `who` with `calls` on the shared file `fd`.
    pub fn new(who: &str, calls: C, fd: C::At) -> Self {
        FstatShared {
            who: who.to_owned(),
            calls,
            fd,
        }
    }
}

impl<C: Calls> Worker for FstatShared<C> {
    fn enter(&mut self) -> Result<()> {
        self.calls.enter()
    }

    fn run(&mut self, n: u32) -> Result<()> {
        const W: &str = "fstat-shared";
        let (c, who) = (&self.calls, self.who.as_str());
        for _ in 0..n {
            let st = c
                .fstat(self.fd)
                .map_err(|e| failed(who, W, format_args!("fstat(0)"), e))?;
            if st.mode & S_IFMT != S_IFREG || st.size != SHARED_FILE_SIZE as i64 {
                return Err(wrong(
                    who,
                    W,
                    format_args!(
                        "fstat(0): mode {:o}, size {}, expected a regular file of \
                         {SHARED_FILE_SIZE} bytes",
                        st.mode, st.size
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// `read-shared`: `pread(fd, buf, 4096, off)` on the shared file, `off` walking it page
/// by page ([`read_shared_offset`]), each read checked whole and its first byte.
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
pub struct ReadShared<C: Calls> {
    /// The target's name, for errors.
    who: String,
    /// This thread's calls (a thread sharing the run's descriptor table).
    calls: C,
    /// The shared file.
    fd: C::At,
    /// This thread's reads so far (the next one's `k`).
    k: u64,
    /// The read buffer (only its first [`READ_SHARED_LEN`] bytes are used).
    buf: Box<ReadBuf>,
}

impl<C: Calls> ReadShared<C> {
    /// The loop of target `who` with `calls` on the shared file `fd`.
    pub fn new(who: &str, calls: C, fd: C::At) -> Self {
        ReadShared {
            who: who.to_owned(),
            calls,
            fd,
            k: 0,
            buf: ReadBuf::boxed(),
        }
    }
}

impl<C: Calls> Worker for ReadShared<C> {
    fn enter(&mut self) -> Result<()> {
        self.calls.enter()
    }

    fn run(&mut self, n: u32) -> Result<()> {
        const W: &str = "read-shared";
        let (c, who) = (&self.calls, self.who.as_str());
        for _ in 0..n {
            let off = read_shared_offset(self.k);
            self.k += 1;
            let buf = &mut self.buf.0[..READ_SHARED_LEN];
            let got = c
                .pread(self.fd, buf, off)
                .map_err(|e| failed(who, W, format_args!("pread(0, {off})"), e))?;
            if got != READ_SHARED_LEN || buf[0] != shared_byte(off) {
                return Err(wrong(
                    who,
                    W,
                    format_args!(
                        "pread(0, {off}): {got} bytes, first {}, expected {READ_SHARED_LEN} \
                         bytes, first {}",
                        buf[0],
                        shared_byte(off)
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// `open-close`: `close(openat(AT_FDCWD, "f<thread>", O_RDONLY))`, the thread's cwd the
/// run's directory (its own file: threads share only the directory they look up in).
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
pub struct OpenClose<C: Calls, P> {
    /// The target's name, for errors.
    who: String,
    /// This thread's calls (its cwd the run's directory).
    calls: C,
    /// This thread's own file, relative to the cwd.
    name: P,
}

impl<C: Calls, P> OpenClose<C, P> {
    /// The loop of target `who` with `calls` on `name` (relative to the cwd).
    pub fn new(who: &str, calls: C, name: P) -> Self {
        OpenClose {
            who: who.to_owned(),
            calls,
            name,
        }
    }
}

impl<C: Calls, P: AsRef<C::Path> + Send> Worker for OpenClose<C, P> {
    fn enter(&mut self) -> Result<()> {
        self.calls.enter()
    }

    fn run(&mut self, n: u32) -> Result<()> {
        const W: &str = "open-close";
        let (c, who) = (&self.calls, self.who.as_str());
        let name = self.name.as_ref();
        for _ in 0..n {
            let fd = c
                .openat(None, name, Open::Read)
                .map_err(|e| failed(who, W, format_args!("open({})", name.show()), e))?;
            c.close(fd)
                .map_err(|e| failed(who, W, format_args!("close({})", name.show()), e))?;
        }
        Ok(())
    }
}

/// `stat-path`: `fstatat(dir, "a/b/c/shared", 0)`, checked a regular file: one path
/// through three directories that every thread walks ([`STAT_PATH`](crate::workloads::STAT_PATH)).
#[derive(Debug)]
#[repr(align(128))] // Own cache lines: see `Worker` (target.rs).
pub struct StatPath<C: Calls, P> {
    /// The target's name, for errors.
    who: String,
    /// This thread's calls.
    calls: C,
    /// The run's directory.
    dir: C::At,
    /// The path, relative to `dir`.
    path: P,
}

impl<C: Calls, P> StatPath<C, P> {
    /// The loop of target `who` with `calls` on `path` relative to `dir`.
    pub fn new(who: &str, calls: C, dir: C::At, path: P) -> Self {
        StatPath {
            who: who.to_owned(),
            calls,
            dir,
            path,
        }
    }
}

impl<C: Calls, P: AsRef<C::Path> + Send> Worker for StatPath<C, P> {
    fn enter(&mut self) -> Result<()> {
        self.calls.enter()
    }

    fn run(&mut self, n: u32) -> Result<()> {
        const W: &str = "stat-path";
        let (c, who) = (&self.calls, self.who.as_str());
        let path = self.path.as_ref();
        for _ in 0..n {
            let st = c
                .fstatat(Some(self.dir), path)
                .map_err(|e| failed(who, W, format_args!("fstatat({})", path.show()), e))?;
            regular_file(who, W, path, st)?;
        }
        Ok(())
    }
}

/// Checks that `st` (of `path`) is a regular file's, as `tree` and `stat-path` do.
#[inline]
fn regular_file<P: PathArg + ?Sized>(who: &str, workload: &str, path: &P, st: Stat) -> Result<()> {
    if st.mode & S_IFMT == S_IFREG {
        return Ok(());
    }
    Err(wrong(
        who,
        workload,
        format_args!("{} is not a regular file (mode {:o})", path.show(), st.mode),
    ))
}
