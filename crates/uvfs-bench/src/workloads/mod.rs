//! The workloads, what one operation of each is, and the small helpers every
//! target shares to run them the same way (file names, per-thread orders).
//!
//! Each workload's loop is written once ([`crate::loops`]) over the calls trait
//! [`crate::calls::Calls`], which every target implements, so the rates compare.

pub mod tree;

use std::ffi::CStr;
use std::sync::Arc;

use serde::Serialize;

pub use tree::{HostTree, SinkResult, TreeEntry, TreeEntryKind, TreeSink, TreeStats};

/// The workloads by name, as given to `--workload`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// UnixBench "System Call Overhead": `close(dup(0)); getpid(); getuid();
    /// umask(022)` per loop, every thread its own process (task) sharing fd 0.
    Syscall,
    /// AIM7 creat-clo: create a uniquely named file in one shared directory
    /// (`O_CREAT|O_WRONLY|O_TRUNC`, 0644), close it, unlink it.
    CreatClo,
    /// The FUSE `request_end` patch's test: `futimens(fd, t1);
    /// futimens(fd, t2)` per loop on one open file shared by all threads.
    Futimes,
    /// Kernbench-like reads of a real tree: per regular file `fstatat`,
    /// `open`, `read` to the end (64 KiB buffer), `close`; each thread in its
    /// own order.
    Tree,
    /// will-it-scale-style `fstat(fd)` on one shared fd: every thread is a
    /// thread of ONE process (one fd table, like `clone(CLONE_FILES)`), so
    /// each call takes and drops a reference on the one shared `File` (Linux
    /// `fdget` on a shared table; the `file_ref_t` patch's test).
    FstatShared,
    /// `pread(fd, buf, 4096, off)` on one shared fd of a 64 KiB file,
    /// threads of one process as in `fstat-shared`; `off`
    /// walks the file page by page.
    ReadShared,
    /// `close(openat(AT_FDCWD, "f<thread>", O_RDONLY))`: every thread its
    /// own process (task) whose cwd is the run's directory, each opening its
    /// own file, so threads share no file, only the directory they look up.
    OpenClose,
    /// `fstatat(dir, "a/b/c/shared", 0)`: every thread its own process (task), all
    /// walking one path through three shared directories to one shared file (the conflict
    /// audit's walk through a shared prefix). Not in the default run ([`WorkloadKind::ALL`]):
    /// run it with `--workload stat-path`.
    StatPath,
}

impl WorkloadKind {
    /// All workloads of the default run, in the order `uvfs bench` runs them: the first
    /// seven of [`WorkloadKind::EVERY`].
    pub const ALL: [WorkloadKind; 7] = {
        let mut all = [WorkloadKind::Syscall; 7];
        let mut i = 0;
        while i < all.len() {
            all[i] = WorkloadKind::EVERY[i];
            i += 1;
        }
        all
    };

    /// Every workload: [`WorkloadKind::ALL`], then those run only when named
    /// (`stat-path`).
    pub const EVERY: [WorkloadKind; 8] = [
        WorkloadKind::Syscall,
        WorkloadKind::CreatClo,
        WorkloadKind::Futimes,
        WorkloadKind::Tree,
        WorkloadKind::FstatShared,
        WorkloadKind::ReadShared,
        WorkloadKind::OpenClose,
        WorkloadKind::StatPath,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Syscall => "syscall",
            WorkloadKind::CreatClo => "creat-clo",
            WorkloadKind::Futimes => "futimes",
            WorkloadKind::Tree => "tree",
            WorkloadKind::FstatShared => "fstat-shared",
            WorkloadKind::ReadShared => "read-shared",
            WorkloadKind::OpenClose => "open-close",
            WorkloadKind::StatPath => "stat-path",
        }
    }

    /// The unit of the rate: what one operation is, per second.
    ///
    /// - `syscall`: loops per second (`lps`), one loop = dup, close, getpid,
    ///   getuid, umask.
    /// - `creat-clo`: files per second, one file = open(O_CREAT), close, unlink.
    /// - `futimes`: loops per second, one loop = two `futimens`.
    /// - `tree`: files per second, one file = fstatat, open, read all, close.
    /// - `fstat-shared`: `fstat` calls per second.
    /// - `read-shared`: 4 KiB `pread` calls per second.
    /// - `open-close`: opens per second, one open = openat, close.
    /// - `stat-path`: `fstatat` calls per second.
    pub fn unit(self) -> &'static str {
        match self {
            WorkloadKind::Syscall => "lps",
            WorkloadKind::CreatClo => "files/s",
            WorkloadKind::Futimes => "loops/s",
            WorkloadKind::Tree => "files/s",
            WorkloadKind::FstatShared => "stats/s",
            WorkloadKind::ReadShared => "reads/s",
            WorkloadKind::OpenClose => "opens/s",
            WorkloadKind::StatPath => "stats/s",
        }
    }

    /// Operations a worker does between two looks at the stop flag: enough
    /// that the shared flag's cache line is read rarely, few enough that a
    /// worker stops well within a millisecond of the flag.
    pub fn batch(self) -> u32 {
        match self {
            WorkloadKind::Syscall
            | WorkloadKind::Futimes
            | WorkloadKind::FstatShared
            | WorkloadKind::ReadShared
            | WorkloadKind::StatPath => 256,
            WorkloadKind::CreatClo | WorkloadKind::OpenClose => 64,
            WorkloadKind::Tree => 4,
        }
    }

    /// Whether the workers are threads of one process sharing one fd table
    /// (`fstat-shared`, `read-shared`) rather than each its own process
    /// with a private copy of it, as after `fork`.
    pub fn shares_fd_table(self) -> bool {
        matches!(self, WorkloadKind::FstatShared | WorkloadKind::ReadShared)
    }
}

impl std::fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A workload ready to run: its kind plus the input it needs.
#[derive(Debug, Clone)]
pub enum Workload {
    /// See [`WorkloadKind::Syscall`].
    Syscall,
    /// See [`WorkloadKind::CreatClo`].
    CreatClo,
    /// See [`WorkloadKind::Futimes`].
    Futimes,
    /// See [`WorkloadKind::Tree`]; the tree read from the host, imported by
    /// each target once (targets compare the `Arc` to know it is the same).
    Tree(Arc<HostTree>),
    /// See [`WorkloadKind::FstatShared`].
    FstatShared,
    /// See [`WorkloadKind::ReadShared`].
    ReadShared,
    /// See [`WorkloadKind::OpenClose`].
    OpenClose,
    /// See [`WorkloadKind::StatPath`].
    StatPath,
}

impl Workload {
    /// The workload's kind (its name, unit and batch size).
    pub fn kind(&self) -> WorkloadKind {
        match self {
            Workload::Syscall => WorkloadKind::Syscall,
            Workload::CreatClo => WorkloadKind::CreatClo,
            Workload::Futimes => WorkloadKind::Futimes,
            Workload::Tree(_) => WorkloadKind::Tree,
            Workload::FstatShared => WorkloadKind::FstatShared,
            Workload::ReadShared => WorkloadKind::ReadShared,
            Workload::OpenClose => WorkloadKind::OpenClose,
            Workload::StatPath => WorkloadKind::StatPath,
        }
    }
}

/// UnixBench's baseline for "System Call Overhead", in lps: its index is
/// `lps / SYSCALL_INDEX_BASELINE * 10`.
pub const SYSCALL_INDEX_BASELINE: f64 = 15000.0;

/// Mode of the files the workloads create (before the umask, 022).
pub const FILE_MODE: u32 = 0o644;

/// Mode of the directories the workloads and the tree import create.
pub const DIR_MODE: u32 = 0o755;

/// The `futimens` times of the `futimes` workload, as `(seconds, nanoseconds)`
/// for both atime and mtime: a loop sets the first, then the second, so every
/// call changes the inode.
pub const FUTIMES_TIMES: [(i64, i64); 2] = [(1_000_000_000, 0), (1_000_000_000, 1)];

/// `S_IFMT` and `S_IFREG`: the file-type bits of `st_mode` and the regular
/// file type (the same on every Linux architecture).
pub const S_IFMT: u32 = 0o170_000;
/// See [`S_IFMT`].
pub const S_IFREG: u32 = 0o100_000;

/// Size of the shared file `dir/shared` of `fstat-shared` and `read-shared`
/// (64 KiB), filled with [`shared_byte`]; `fstat` checks `st_size` is this.
pub const SHARED_FILE_SIZE: u64 = 64 * 1024;

/// Bytes one `read-shared` `pread` asks for (and must get): one page.
pub const READ_SHARED_LEN: usize = 4096;

/// The byte at `offset` of the shared file: `offset % 251` (a prime, so
/// every page of the file starts with a different byte).
#[inline]
pub fn shared_byte(offset: u64) -> u8 {
    (offset % 251) as u8
}

/// The shared file's [`SHARED_FILE_SIZE`] bytes, [`shared_byte`] each.
pub fn shared_contents() -> Vec<u8> {
    (0..SHARED_FILE_SIZE).map(shared_byte).collect()
}

/// The offset of a thread's `k`th `read-shared` `pread` (from 0):
/// `(k * 4096) % 65536`, page after page, around the file.
#[inline]
pub fn read_shared_offset(k: u64) -> u64 {
    (k % (SHARED_FILE_SIZE / READ_SHARED_LEN as u64)) * READ_SHARED_LEN as u64
}

/// The name of thread `thread`'s own `open-close` file in the run's
/// directory: `f<thread>`, created by setup, opened relative to the cwd.
pub fn open_close_name(thread: usize) -> String {
    format!("f{thread}")
}

/// The `stat-path` workload's directories below the run's directory, parents first, and
/// its file (created empty), which every thread `fstatat`s relative to the run's directory.
pub const STAT_PATH_DIRS: [&str; 3] = ["a", "a/b", "a/b/c"];
/// See [`STAT_PATH_DIRS`].
pub const STAT_PATH: &str = "a/b/c/shared";

/// Size of the buffer `tree` reads files with.
pub const READ_BUF: usize = 64 * 1024;

/// `tree`'s read buffer: [`READ_BUF`] bytes on whole 128-byte line pairs of
/// its own.
///
/// Buffers are allocated by the main thread one after another; unaligned,
/// the end of one thread's buffer and the start of the next one's could
/// share a cache line that both threads' reads write (false sharing, which
/// would be the harness's cost, not the target's).
#[repr(C, align(128))]
pub struct ReadBuf(pub [u8; READ_BUF]);

impl ReadBuf {
    /// A zeroed buffer on the heap.
    pub fn boxed() -> Box<ReadBuf> {
        Box::new(ReadBuf([0; READ_BUF]))
    }
}

impl std::fmt::Debug for ReadBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReadBuf({} bytes)", self.0.len())
    }
}

/// Unique file names for creat-clo: `t<thread>-<counter>`, NUL-terminated in
/// place so the kernel side passes a `&CStr` without copying.
#[derive(Debug)]
pub struct NameBuf {
    /// `t<thread>-` followed by the current counter's digits and a NUL.
    buf: [u8; 48],
    /// Length of the `t<thread>-` prefix.
    prefix: usize,
    /// Length of the name without its NUL.
    len: usize,
    /// The next counter value to format.
    counter: u64,
}

impl NameBuf {
    /// Names for thread `thread`; the first is `t<thread>-0`.
    pub fn new(thread: usize) -> Self {
        let mut buf = [0u8; 48];
        buf[0] = b't';
        let prefix = 1 + write_decimal(&mut buf[1..], thread as u64);
        buf[prefix] = b'-';
        Self {
            buf,
            prefix: prefix + 1,
            len: 0,
            counter: 0,
        }
    }

    /// Formats the next name; read it with [`NameBuf::name`] or
    /// [`NameBuf::c_name`].
    #[inline]
    pub fn advance(&mut self) {
        let digits = write_decimal(&mut self.buf[self.prefix..], self.counter);
        self.len = self.prefix + digits;
        self.buf[self.len] = 0;
        self.counter += 1;
    }

    /// The current name, without NUL.
    #[inline]
    pub fn name(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// The current name as a C string.
    #[inline]
    pub fn c_name(&self) -> &CStr {
        // The buffer holds digits and `t`/`-` only, NUL at `len`: never an
        // interior NUL, so this cannot fail; fall back to "" to stay panic-free.
        CStr::from_bytes_with_nul(&self.buf[..=self.len]).unwrap_or_default()
    }

    /// The current name as a `str`.
    #[inline]
    pub fn str_name(&self) -> &str {
        // Digits and `t`/`-` only: always UTF-8, so this cannot fail; fall back to "" to
        // stay panic-free, as `c_name`.
        std::str::from_utf8(self.name()).unwrap_or_default()
    }
}

/// Writes `v` in decimal at the start of `out` and returns the digit count.
/// `out` must hold 20 bytes (u64::MAX has 20 digits).
fn write_decimal(out: &mut [u8], mut v: u64) -> usize {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let n = tmp.len() - i;
    out[..n].copy_from_slice(&tmp[i..]);
    n
}

/// The order in which thread `thread` visits `len` files: a Fisher–Yates
/// shuffle driven by splitmix64 seeded with the thread index, so each thread
/// has its own order, the same on every target and every run.
pub fn thread_order(len: usize, thread: usize) -> Vec<u32> {
    let mut order: Vec<u32> = (0..len as u32).collect();
    let mut state = 0x9e37_79b9_7f4a_7c15_u64 ^ (thread as u64 + 1);
    for i in (1..order.len()).rev() {
        let j = (splitmix64(&mut state) % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// One step of splitmix64 (Steele, Lea, Flood 2014): a tiny, good-enough PRNG.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_terminated() {
        let mut n = NameBuf::new(12);
        n.advance();
        assert_eq!(n.name(), b"t12-0");
        for _ in 0..9 {
            n.advance();
        }
        assert_eq!(n.name(), b"t12-9");
        n.advance();
        assert_eq!(n.name(), b"t12-10");
        assert_eq!(n.c_name().to_bytes(), b"t12-10");
        assert_eq!(n.str_name(), "t12-10");
    }

    #[test]
    fn orders_are_permutations_and_differ() {
        let a = thread_order(100, 0);
        let b = thread_order(100, 1);
        assert_ne!(a, b);
        let mut s = a.clone();
        s.sort_unstable();
        assert_eq!(s, (0..100).collect::<Vec<u32>>());
        assert_eq!(a, thread_order(100, 0));
        assert!(thread_order(0, 3).is_empty());
    }

    #[test]
    fn shared_file_offsets_and_pattern() {
        let offsets: Vec<u64> = (0..18).map(read_shared_offset).collect();
        for (k, &off) in offsets.iter().enumerate() {
            assert_eq!(off, (k as u64 * 4096) % 65536);
            assert!(off + READ_SHARED_LEN as u64 <= SHARED_FILE_SIZE);
        }
        let data = shared_contents();
        assert_eq!(data.len() as u64, SHARED_FILE_SIZE);
        assert_eq!(data[250], 250);
        assert_eq!(data[251], 0);
        // Every page starts differently, so a read of the wrong page is seen.
        let mut firsts: Vec<u8> = (0..16).map(|k| data[k * READ_SHARED_LEN]).collect();
        firsts.sort_unstable();
        firsts.dedup();
        assert_eq!(firsts.len(), 16);
        assert_eq!(open_close_name(3), "f3");
    }

    #[test]
    fn every_workload_is_listed_once() {
        let mut names: Vec<&str> = WorkloadKind::EVERY.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), WorkloadKind::EVERY.len());
        assert_eq!(
            WorkloadKind::EVERY[..WorkloadKind::ALL.len()],
            WorkloadKind::ALL
        );
        // The names are `--workload`'s.
        for k in WorkloadKind::EVERY {
            assert_eq!(
                <WorkloadKind as clap::ValueEnum>::from_str(k.name(), false),
                Ok(k)
            );
        }
        assert!(WorkloadKind::FstatShared.shares_fd_table());
        assert!(WorkloadKind::ReadShared.shares_fd_table());
        assert!(!WorkloadKind::OpenClose.shares_fd_table());
        assert!(!WorkloadKind::Syscall.shares_fd_table());
    }
}
