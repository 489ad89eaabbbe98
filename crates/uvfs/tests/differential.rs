//! Differential property test: random programs of system calls run on uvfs and on the host
//! Linux kernel (a fresh tmpfs, see `common`); every result and errno, then the final tree,
//! must be equal. Linux is the reference.
//!
//! # A program
//! A `Vec<Step>` after a fixed [`setup`] (a few files, two open descriptors, a uid-1000
//! thread owning a directory): each step is one [`Op`] by one task (its index modulo the
//! number of tasks so far). Task 0 is root; `Spawn` makes a new
//! task from the step's task, either a thread sharing its fd table and fs context
//! (`clone_thread`; on the host a thread spawned by the parent's thread) or a process with a
//! copy of both (`fork`; on the host a thread that then `unshare(CLONE_FILES | CLONE_FS)`s),
//! with root's or an unprivileged user's credentials (per-thread `setres[ug]id` on the
//! host). Names come from a small set ([`PATHS`]) so that operations collide; descriptors
//! are symbolic ([`F`]): the n-th descriptor open in the task's table, or a raw number (to
//! reach `EBADF`). Results are compared as [`Out`]: stats through [`Attr`] (no inode or
//! device numbers; times only as "the explicit past value" or "now"), directory listings as
//! sets (getdents order differs from Linux by design; a `Getdents` step reads to the end,
//! so partial listings, whose content depends on the order, are never compared).
//!
//! # Running
//! `cargo test -p uvfs --test differential` runs [`DEFAULT_CASES`] programs from a fixed
//! seed. Long runs: `UVFS_PROPTEST_CASES=20000 PROPTEST_RNG_SEED=$RANDOM cargo test
//! --release -p uvfs --test differential -- --nocapture` (the seed is printed; the same seed
//! and case count replay a run). On a divergence proptest shrinks the program, and the
//! panic shows the minimal program with both sides' results, the first divergence marked.
//! `UVFS_PROPTEST_STATS=1` prints how often each operation gave each result (is a new
//! operation reaching success, and which errnos?).
//!
//! Each program also runs on hostfs over a fresh host tmpfs (`common`'s `Uvfs::hostfs`;
//! off with `UVFS_NO_HOSTFS=1`), compared with Linux the same way.
//!
//! Without root, or with `UVFS_NO_HOST=1`, the host side is unavailable: the test says so
//! and checks uvfs-only invariants instead (each program gives the same results on two
//! fresh file systems; the final tree is consistent: directory link counts, file sizes).
//!
//! # Adding an operation
//! One variant in [`Op`], one line in [`op_strategy`] (its generator and weight), one arm in
//! [`exec`] (the call through [`Sys`], its result as an [`Out`]). An operation that returns
//! a new descriptor returns `Out::Fd`, one that closes returns `Out::Closed`: the driver
//! tracks open descriptors from those.
//!
//! # Known divergences kept out of the generator
//! - `lseek` on a directory other than to offset 0 with `SEEK_SET`: directory offsets are
//!   uvfs's own cookies (intentional difference); [`exec`] skips such calls.
//! - `mknodat` makes no FIFOs: opening one differs on purpose (no pipes in uvfs) and
//!   blocks on Linux.

mod common;
use common::*;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::Union;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::mpsc::{channel, Sender};
use uvfs::types::S_IFREG;
use uvfs::types::{SEEK_CUR, SEEK_DATA, SEEK_END, SEEK_HOLE, SEEK_SET, S_IFDIR, S_IFLNK, S_IFMT};
use uvfs::{AtFlags, Errno, Fcntl, Fd, OpenFlags, RenameFlags, Stat, Timespec};

/// Programs per `cargo test` run (CI); `UVFS_PROPTEST_CASES` overrides.
const DEFAULT_CASES: u32 = 512;
/// Seed when `PROPTEST_RNG_SEED` is not set, so that CI runs are reproducible.
const DEFAULT_SEED: u64 = 0x75_76_66_73;
/// Steps per program.
const MAX_STEPS: usize = 40;
/// Tasks per program (further `Spawn`s are skipped).
const MAX_TASKS: usize = 4;

// ---------------------------------------------------------------------------------------
// the program

/// Path arguments, the common ones first. Relative ones resolve against the task's cwd (or
/// a directory fd).
const PATHS: &[&str] = &["a", "b", "d", "d/a", "d/b", "l", "d/l", "e", "e/a"];
/// Rarer path arguments: dots, trailing slashes, absolute, empty, through a file.
const ODD_PATHS: &[&str] = &[
    ".", "..", "a/", "d/", "l/", "d/a/", "/", "/d/b", "", "d/../a", "a/x", "d/d/a",
];

/// Symlink targets.
const TARGETS: &[&str] = &["a", "d", "d/a", "/d", "nowhere", "l", "..", "d/", ""];

/// Offsets and lengths for `pread`, `pwrite`, `lseek`, `ftruncate`.
const OFFSETS: &[i64] = &[0, 1, 7, 4096, 5000, -1, 1 << 40];

/// A symbolic descriptor.
#[derive(Clone, Copy, Debug)]
enum F {
    /// The n-th (modulo their number) descriptor open in the task's table, in increasing
    /// order; descriptor n when none is open.
    Slot(u8),
    /// This number as it is.
    Raw(i32),
}

/// A `dirfd` argument.
#[derive(Clone, Copy, Debug)]
enum D {
    Cwd,
    Fd(F),
}

/// Credentials of a spawned task.
#[derive(Clone, Copy, Debug)]
enum Who {
    Root,
    /// uid 1000, gid 1000.
    U1000,
    /// uid 1001, gid 1001, supplementary group 1000.
    U1001,
}

impl Who {
    fn ids(self) -> (u32, u32, &'static [u32]) {
        match self {
            Who::Root => (0, 0, &[]),
            Who::U1000 => (1000, 1000, &[]),
            Who::U1001 => (1001, 1001, &[1000]),
        }
    }
}

/// A mode, shown in octal.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Oct(u32);

impl fmt::Debug for Oct {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0o{:o}", self.0)
    }
}

/// Data to write: `len` bytes counting up from `first` (modulo 5).
#[derive(Clone, Copy)]
struct Chunk {
    first: u8,
    len: usize,
}

impl Chunk {
    fn bytes(self) -> Vec<u8> {
        (0..self.len).map(|i| self.first + (i % 5) as u8).collect()
    }
}

impl fmt::Debug for Chunk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{:?}..", self.len, self.first as char)
    }
}

/// `[atime, mtime]` for `utimensat`/`futimens`.
#[derive(Clone, Copy, Debug)]
enum Times {
    /// `NULL`: both now.
    Now,
    /// 2001 and 2002.
    Past,
    /// atime `UTIME_OMIT`, mtime 2001.
    OmitAtime,
}

impl Times {
    fn get(self) -> Option<[Timespec; 2]> {
        match self {
            Times::Now => None,
            Times::Past => Some([T2001, T2002]),
            Times::OmitAtime => Some([Timespec::UTIME_OMIT, T2001]),
        }
    }
}

/// One operation (see the module doc, "Adding an operation").
#[derive(Clone, Debug)]
enum Op {
    /// A new task from this one: `fork` (copied fd table and fs context) or a thread.
    Spawn {
        fork: bool,
        who: Who,
    },
    Open(D, &'static str, OpenFlags, Oct),
    Close(F),
    Dup(F),
    Dup2(F, F),
    Dup3(F, F, OpenFlags),
    Fcntl(F, Fcntl),
    Read(F, usize),
    Write(F, Chunk),
    Pread(F, usize, i64),
    Pwrite(F, Chunk, i64),
    Lseek(F, i64, i32),
    Ftruncate(F, i64),
    Fstat(F),
    Fstatat(D, &'static str, AtFlags),
    Mkdirat(D, &'static str, Oct),
    Unlinkat(D, &'static str, AtFlags),
    Renameat(D, &'static str, D, &'static str),
    Symlinkat(&'static str, D, &'static str),
    Readlinkat(D, &'static str, usize),
    Getdents(F, usize),
    Fchdir(F),
    Chdir(&'static str),
    Getcwd,
    Utimensat(D, &'static str, Times, AtFlags),
    Futimens(F, Times),
    Umask(Oct),
    Linkat(D, &'static str, D, &'static str, AtFlags),
    Renameat2(D, &'static str, D, &'static str, RenameFlags),
    Fchmod(F, Oct),
    Fchmodat(D, &'static str, Oct),
    Fchown(F, u32, u32),
    Fchownat(D, &'static str, u32, u32, AtFlags),
    Truncate(&'static str, i64),
    Faccessat2(D, &'static str, u32, AtFlags),
    Mknodat(D, &'static str, Oct),
}

/// One step: `task` (modulo the number of tasks so far) runs `op`.
#[derive(Clone)]
struct Step {
    task: u8,
    op: Op,
}

impl fmt::Debug for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t{}: {:?}", self.task, self.op)
    }
}

/// A program, shown one step a line.
#[derive(Clone)]
struct Program(Vec<Step>);

impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "[")?;
        for (i, s) in self.0.iter().enumerate() {
            writeln!(f, "  {i:2} {s:?}")?;
        }
        write!(f, "]")
    }
}

// ---------------------------------------------------------------------------------------
// generators

fn fd() -> impl Strategy<Value = F> {
    prop_oneof![
        12 => (0..6u8).prop_map(F::Slot),
        1 => select(vec![-1, 9, -100]).prop_map(F::Raw),
    ]
}

fn dirfd() -> impl Strategy<Value = D> {
    prop_oneof![3 => Just(D::Cwd), 1 => fd().prop_map(D::Fd)]
}

fn path() -> impl Strategy<Value = &'static str> {
    prop_oneof![4 => select(PATHS), 1 => select(ODD_PATHS)]
}

fn mode() -> impl Strategy<Value = Oct> {
    select(vec![
        0o644, 0o755, 0o600, 0o777, 0o000, 0o1777, 0o2755, 0o4755, 0o2745, 0o17777,
    ])
    .prop_map(Oct)
}

fn open_flags() -> impl Strategy<Value = OpenFlags> {
    let access = select(vec![OpenFlags::RDONLY, OpenFlags::WRONLY, OpenFlags::RDWR]);
    let extra = [
        OpenFlags::CREAT,
        OpenFlags::EXCL,
        OpenFlags::TRUNC,
        OpenFlags::APPEND,
        OpenFlags::DIRECTORY,
        OpenFlags::NOFOLLOW,
        OpenFlags::CLOEXEC,
        OpenFlags::NOATIME,
        OpenFlags::PATH,
        OpenFlags::TMPFILE,
    ];
    // How likely each extra flag is.
    let bits = [0.5, 0.15, 0.2, 0.2, 0.1, 0.1, 0.1, 0.05, 0.07, 0.05].map(proptest::bool::weighted);
    (access, bits).prop_map(move |(a, bits)| {
        extra
            .iter()
            .zip(bits)
            .filter(|(_, on)| *on)
            .fold(a, |f, (x, _)| f | *x)
    })
}

fn dup3_flags() -> impl Strategy<Value = OpenFlags> {
    select(vec![
        OpenFlags::empty(),
        OpenFlags::CLOEXEC,
        OpenFlags::APPEND,
    ])
}

fn fcntl_cmd() -> impl Strategy<Value = Fcntl> {
    let fl = [
        OpenFlags::APPEND,
        OpenFlags::NONBLOCK,
        OpenFlags::NOATIME,
        OpenFlags::RDWR,
    ];
    prop_oneof![
        Just(Fcntl::GetFl),
        Just(Fcntl::GetFd),
        select(vec![0, 1, 3]).prop_map(Fcntl::SetFd),
        (0..16u32).prop_map(move |bits| Fcntl::SetFl(
            fl.iter()
                .enumerate()
                .filter(|(i, _)| bits & (1 << i) != 0)
                .fold(0, |a, (_, f)| a | f.bits())
        )),
        select(vec![0, 5, -1]).prop_map(Fcntl::DupFd),
        select(vec![0, 5]).prop_map(Fcntl::DupFdCloexec),
    ]
}

fn chunk() -> impl Strategy<Value = Chunk> {
    (b'a'..=b'e', select(vec![0, 1, 12, 100, 4097])).prop_map(|(first, len)| Chunk { first, len })
}

fn len() -> impl Strategy<Value = usize> {
    select(vec![0, 1, 5, 100, 8192])
}

fn off() -> impl Strategy<Value = i64> {
    select(OFFSETS)
}

fn whence() -> impl Strategy<Value = i32> {
    select(vec![SEEK_SET, SEEK_CUR, SEEK_END, SEEK_DATA, SEEK_HOLE, 7])
}

/// `fstatat`/`utimensat` flags: none, `AT_SYMLINK_NOFOLLOW`, `AT_EMPTY_PATH`, an unknown
/// bit (EINVAL).
fn at_flags() -> impl Strategy<Value = AtFlags> {
    prop_oneof![
        6 => select(vec![AtFlags::empty(), AtFlags::SYMLINK_NOFOLLOW]),
        1 => select(vec![AtFlags::EMPTY_PATH, AtFlags::from_bits_retain(0x8000)]),
    ]
}

fn times() -> impl Strategy<Value = Times> {
    select(vec![Times::Past, Times::OmitAtime, Times::Now])
}

/// Every operation with its weight.
fn op_strategy() -> impl Strategy<Value = Op> {
    let who = select(vec![Who::U1000, Who::Root, Who::U1001]);
    let rmdir = prop_oneof![
        8 => select(vec![AtFlags::empty(), AtFlags::REMOVEDIR]),
        1 => Just(AtFlags::SYMLINK_NOFOLLOW),
    ];
    Union::new_weighted(vec![
        (
            2,
            (any::<bool>(), who)
                .prop_map(|(fork, who)| Op::Spawn { fork, who })
                .boxed(),
        ),
        (
            12,
            (dirfd(), path(), open_flags(), mode())
                .prop_map(|(d, p, f, m)| Op::Open(d, p, f, m))
                .boxed(),
        ),
        (4, fd().prop_map(Op::Close).boxed()),
        (2, fd().prop_map(Op::Dup).boxed()),
        (2, (fd(), fd()).prop_map(|(a, b)| Op::Dup2(a, b)).boxed()),
        (
            1,
            (fd(), fd(), dup3_flags())
                .prop_map(|(a, b, f)| Op::Dup3(a, b, f))
                .boxed(),
        ),
        (
            3,
            (fd(), fcntl_cmd())
                .prop_map(|(f, c)| Op::Fcntl(f, c))
                .boxed(),
        ),
        (4, (fd(), len()).prop_map(|(f, n)| Op::Read(f, n)).boxed()),
        (
            5,
            (fd(), chunk()).prop_map(|(f, c)| Op::Write(f, c)).boxed(),
        ),
        (
            2,
            (fd(), len(), off())
                .prop_map(|(f, n, o)| Op::Pread(f, n, o))
                .boxed(),
        ),
        (
            3,
            (fd(), chunk(), off())
                .prop_map(|(f, c, o)| Op::Pwrite(f, c, o))
                .boxed(),
        ),
        (
            3,
            (fd(), off(), whence())
                .prop_map(|(f, o, w)| Op::Lseek(f, o, w))
                .boxed(),
        ),
        (
            2,
            (fd(), off()).prop_map(|(f, o)| Op::Ftruncate(f, o)).boxed(),
        ),
        (3, fd().prop_map(Op::Fstat).boxed()),
        (
            4,
            (dirfd(), path(), at_flags())
                .prop_map(|(d, p, n)| Op::Fstatat(d, p, n))
                .boxed(),
        ),
        (
            6,
            (dirfd(), path(), mode())
                .prop_map(|(d, p, m)| Op::Mkdirat(d, p, m))
                .boxed(),
        ),
        (
            5,
            (dirfd(), path(), rmdir)
                .prop_map(|(d, p, r)| Op::Unlinkat(d, p, r))
                .boxed(),
        ),
        (
            5,
            (dirfd(), path(), dirfd(), path())
                .prop_map(|(a, p, b, q)| Op::Renameat(a, p, b, q))
                .boxed(),
        ),
        (
            4,
            (select(TARGETS), dirfd(), path())
                .prop_map(|(t, d, p)| Op::Symlinkat(t, d, p))
                .boxed(),
        ),
        (
            2,
            (dirfd(), path(), select(vec![100, 2, 0]))
                .prop_map(|(d, p, n)| Op::Readlinkat(d, p, n))
                .boxed(),
        ),
        (
            3,
            (fd(), select(vec![4096, 10]))
                .prop_map(|(f, n)| Op::Getdents(f, n))
                .boxed(),
        ),
        (2, fd().prop_map(Op::Fchdir).boxed()),
        (2, path().prop_map(Op::Chdir).boxed()),
        (1, Just(Op::Getcwd).boxed()),
        (
            3,
            (dirfd(), path(), times(), at_flags())
                .prop_map(|(d, p, t, n)| Op::Utimensat(d, p, t, n))
                .boxed(),
        ),
        (
            1,
            (fd(), times())
                .prop_map(|(f, t)| Op::Futimens(f, t))
                .boxed(),
        ),
        (
            1,
            select(vec![0o022, 0o077, 0o000, 0o027])
                .prop_map(|m| Op::Umask(Oct(m)))
                .boxed(),
        ),
        (
            3,
            (dirfd(), path(), dirfd(), path(), link_flags())
                .prop_map(|(a, p, b, q, f)| Op::Linkat(a, p, b, q, f))
                .boxed(),
        ),
        (
            2,
            (dirfd(), path(), dirfd(), path(), rename_flags())
                .prop_map(|(a, p, b, q, f)| Op::Renameat2(a, p, b, q, f))
                .boxed(),
        ),
        (
            2,
            (fd(), mode()).prop_map(|(f, m)| Op::Fchmod(f, m)).boxed(),
        ),
        (
            3,
            (dirfd(), path(), mode())
                .prop_map(|(d, p, m)| Op::Fchmodat(d, p, m))
                .boxed(),
        ),
        (
            1,
            (fd(), id(), id())
                .prop_map(|(f, u, g)| Op::Fchown(f, u, g))
                .boxed(),
        ),
        (
            3,
            (dirfd(), path(), id(), id(), at_flags())
                .prop_map(|(d, p, u, g, f)| Op::Fchownat(d, p, u, g, f))
                .boxed(),
        ),
        (
            2,
            (path(), off())
                .prop_map(|(p, o)| Op::Truncate(p, o))
                .boxed(),
        ),
        (
            3,
            (dirfd(), path(), 0..8u32, access_flags())
                .prop_map(|(d, p, m, f)| Op::Faccessat2(d, p, m, f))
                .boxed(),
        ),
        (
            1,
            (dirfd(), path(), node_mode())
                .prop_map(|(d, p, m)| Op::Mknodat(d, p, m))
                .boxed(),
        ),
    ])
}

fn link_flags() -> impl Strategy<Value = AtFlags> {
    select(vec![
        AtFlags::empty(),
        AtFlags::SYMLINK_FOLLOW,
        AtFlags::EMPTY_PATH,
        AtFlags::SYMLINK_NOFOLLOW,
    ])
}

fn rename_flags() -> impl Strategy<Value = RenameFlags> {
    select(vec![
        RenameFlags::NOREPLACE,
        RenameFlags::EXCHANGE,
        RenameFlags::empty(),
        RenameFlags::NOREPLACE | RenameFlags::EXCHANGE,
    ])
}

/// Owners for chown: root, the two users, -1 (unchanged).
fn id() -> impl Strategy<Value = u32> {
    select(vec![u32::MAX, 1000, 0, 1001])
}

fn access_flags() -> impl Strategy<Value = AtFlags> {
    select(vec![
        AtFlags::empty(),
        AtFlags::EACCESS,
        AtFlags::SYMLINK_NOFOLLOW,
        AtFlags::EMPTY_PATH,
    ])
}

/// mknod modes: a socket, a regular file, a character device (EPERM for non-root).
// known divergence: no FIFOs. Opening one is an intentional difference (README: uvfs has
// no pipes and refuses, where Linux completes an O_RDWR open and blocks an O_RDONLY one,
// which would hang the host side).
fn node_mode() -> impl Strategy<Value = Oct> {
    select(vec![0o140755, 0o100600, 0o020644]).prop_map(Oct)
}

/// The steps every program starts with (so that descriptors and names exist):
/// `/a` ("abcde"), `/d/`, `/d/b` (empty), `/l -> a`; task 0 holds fd 0 = `/a` read-write
/// and fd 1 = `/d`. Task 1, a thread of task 0 as uid 1000, owns `/e/` (0o750) and
/// `/e/a` (0o640, "ab").
fn setup() -> Vec<Step> {
    let t0 = |op| Step { task: 0, op };
    let t1 = |op| Step { task: 1, op };
    let rw = OpenFlags::RDWR | OpenFlags::CREAT;
    vec![
        t0(Op::Open(D::Cwd, "a", rw, Oct(0o644))),
        t0(Op::Write(
            F::Slot(0),
            Chunk {
                first: b'a',
                len: 5,
            },
        )),
        t0(Op::Mkdirat(D::Cwd, "d", Oct(0o755))),
        t0(Op::Open(D::Cwd, "d", OpenFlags::RDONLY, Oct(0))),
        t0(Op::Open(D::Cwd, "d/b", rw, Oct(0o644))),
        t0(Op::Close(F::Raw(2))),
        t0(Op::Symlinkat("a", D::Cwd, "l")),
        t0(Op::Spawn {
            fork: false,
            who: Who::U1000,
        }),
        t1(Op::Mkdirat(D::Cwd, "e", Oct(0o750))),
        t1(Op::Open(D::Cwd, "e/a", rw, Oct(0o640))),
        t1(Op::Write(
            F::Raw(2),
            Chunk {
                first: b'a',
                len: 2,
            },
        )),
        t1(Op::Close(F::Raw(2))),
    ]
}

fn program() -> impl Strategy<Value = Program> {
    let step = (0..MAX_TASKS as u8, op_strategy()).prop_map(|(task, op)| Step { task, op });
    proptest::collection::vec(step, 1..=MAX_STEPS).prop_map(|steps| {
        let mut all = setup();
        all.extend(steps);
        Program(all)
    })
}

// ---------------------------------------------------------------------------------------
// results

/// A time: an explicit time the program set (before 2020), or "now" (any later time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum T {
    Past(i64, i64),
    Now,
}

fn t(ts: Timespec) -> T {
    if ts.tv_sec < 1_577_836_800 {
        T::Past(ts.tv_sec, ts.tv_nsec)
    } else {
        T::Now
    }
}

/// The comparable part of a `Stat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Attr {
    mode: Oct,
    nlink: u64,
    uid: u32,
    gid: u32,
    size: i64,
    blocks: i64,
    atime: T,
    mtime: T,
    ctime: T,
}

fn attr(s: Stat) -> Attr {
    Attr {
        mode: Oct(s.st_mode),
        nlink: s.st_nlink,
        uid: s.st_uid,
        gid: s.st_gid,
        size: s.st_size,
        blocks: s.st_blocks,
        atime: t(s.st_atime),
        mtime: t(s.st_mtime),
        ctime: t(s.st_ctime),
    }
}

/// Bytes, shown as runs.
#[derive(Clone, PartialEq, Eq)]
struct Bytes(Vec<u8>);

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.len() <= 40 {
            return write!(f, "b{:?}", String::from_utf8_lossy(&self.0));
        }
        write!(f, "{} bytes: ", self.0.len())?;
        let z = self.0.iter().filter(|&&b| b == 0).count();
        write!(
            f,
            "{z} zero, starts {:?}",
            String::from_utf8_lossy(&self.0[..20])
        )
    }
}

/// The result of one step.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Out {
    Ok,
    /// A new descriptor (the driver records it as open).
    Fd(i32),
    /// This descriptor was closed (the driver records it as closed).
    Closed(i32),
    N(i64),
    Data(Bytes),
    Attr(Attr),
    Names(BTreeSet<(String, u8)>),
    Umask(Oct),
    Spawned(usize),
    /// Not run (the reason).
    Skip(&'static str),
    Err(Errno),
}

fn out<T>(r: uvfs::Result<T>, f: impl FnOnce(T) -> Out) -> Out {
    match r {
        Ok(v) => f(v),
        Err(e) => Out::Err(e),
    }
}

fn unit(r: uvfs::Result<()>) -> Out {
    out(r, |()| Out::Ok)
}

/// Runs `op` on `s`; `fds` are the descriptors open in the task's table, ascending.
fn exec(s: &mut dyn Sys, op: &Op, fds: &[i32]) -> Out {
    let f = |x: F| match x {
        F::Slot(i) if fds.is_empty() => Fd(i as i32),
        F::Slot(i) => Fd(fds[i as usize % fds.len()]),
        F::Raw(n) => Fd(n),
    };
    let d = |x: D| match x {
        D::Cwd => CWD,
        D::Fd(x) => f(x),
    };
    let p = |s: &'static str| s.as_bytes();
    match *op {
        Op::Spawn { .. } => unreachable!("the driver spawns"),
        Op::Open(dir, path, flags, m) => {
            out(s.openat(d(dir), p(path), flags, m.0), |fd| Out::Fd(fd.0))
        }
        Op::Close(x) => out(s.close(f(x)), |()| Out::Closed(f(x).0)),
        Op::Dup(x) => out(s.dup(f(x)), |fd| Out::Fd(fd.0)),
        Op::Dup2(a, b) => out(s.dup2(f(a), f(b)), |fd| Out::Fd(fd.0)),
        Op::Dup3(a, b, fl) => out(s.dup3(f(a), f(b), fl), |fd| Out::Fd(fd.0)),
        Op::Fcntl(x, cmd @ (Fcntl::DupFd(_) | Fcntl::DupFdCloexec(_))) => {
            out(s.fcntl(f(x), cmd), Out::Fd)
        }
        Op::Fcntl(x, cmd) => out(s.fcntl(f(x), cmd), |n| Out::N(n as i64)),
        Op::Read(x, n) => {
            let mut buf = vec![0; n];
            out(s.read(f(x), &mut buf), |n| {
                Out::Data(Bytes(buf[..n].to_vec()))
            })
        }
        Op::Write(x, c) => out(s.write(f(x), &c.bytes()), |n| Out::N(n as i64)),
        Op::Pread(x, n, o) => {
            let mut buf = vec![0; n];
            out(s.pread(f(x), &mut buf, o), |n| {
                Out::Data(Bytes(buf[..n].to_vec()))
            })
        }
        Op::Pwrite(x, c, o) => out(s.pwrite(f(x), &c.bytes(), o), |n| Out::N(n as i64)),
        Op::Lseek(x, o, w) => {
            // known divergence (intentional): directory offsets are uvfs's own cookies.
            let is_dir = s.fstat(f(x)).is_ok_and(|st| st.st_mode & S_IFMT == S_IFDIR);
            if is_dir && (o, w) != (0, SEEK_SET) {
                return Out::Skip("lseek on a directory to a cookie");
            }
            out(s.lseek(f(x), o, w), Out::N)
        }
        Op::Ftruncate(x, n) => unit(s.ftruncate(f(x), n)),
        Op::Fstat(x) => out(s.fstat(f(x)), |st| Out::Attr(attr(st))),
        Op::Fstatat(dir, path, fl) => out(s.fstatat(d(dir), p(path), fl), |st| Out::Attr(attr(st))),
        Op::Mkdirat(dir, path, m) => unit(s.mkdirat(d(dir), p(path), m.0)),
        Op::Unlinkat(dir, path, fl) => unit(s.unlinkat(d(dir), p(path), fl)),
        Op::Renameat(a, x, b, y) => unit(s.renameat(d(a), p(x), d(b), p(y))),
        Op::Symlinkat(target, dir, path) => unit(s.symlinkat(p(target), d(dir), p(path))),
        Op::Readlinkat(dir, path, n) => {
            let mut buf = vec![0; n];
            out(s.readlinkat(d(dir), p(path), &mut buf), |n| {
                Out::Data(Bytes(buf[..n].to_vec()))
            })
        }
        Op::Getdents(x, n) => out(s.list_fd(f(x), n), |v| Out::Names(v.into_iter().collect())),
        Op::Fchdir(x) => unit(s.fchdir(f(x))),
        Op::Chdir(path) => unit(s.chdir(p(path))),
        Op::Getcwd => out(s.getcwd(), |c| Out::Data(Bytes(c))),
        Op::Utimensat(dir, path, tm, fl) => {
            unit(s.utimensat(d(dir), p(path), tm.get().as_ref(), fl))
        }
        Op::Futimens(x, tm) => unit(s.futimens(f(x), tm.get().as_ref())),
        Op::Umask(m) => Out::Umask(Oct(s.umask(m.0))),
        Op::Linkat(a, x, b, y, fl) => unit(s.linkat(d(a), p(x), d(b), p(y), fl)),
        Op::Renameat2(a, x, b, y, fl) => unit(s.renameat2(d(a), p(x), d(b), p(y), fl)),
        Op::Fchmod(x, m) => unit(s.fchmod(f(x), m.0)),
        Op::Fchmodat(dir, path, m) => unit(s.fchmodat(d(dir), p(path), m.0, AtFlags::empty())),
        Op::Fchown(x, u, g) => unit(s.fchown(f(x), u, g)),
        Op::Fchownat(dir, path, u, g, fl) => unit(s.fchownat(d(dir), p(path), u, g, fl)),
        Op::Truncate(path, n) => unit(s.truncate(p(path), n)),
        Op::Faccessat2(dir, path, m, fl) => unit(s.faccessat2(d(dir), p(path), m, fl)),
        Op::Mknodat(dir, path, m) => unit(s.mknodat(d(dir), p(path), m.0, 0)),
    }
}

// ---------------------------------------------------------------------------------------
// the final tree

/// What a path holds at the end.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Content {
    Dir,
    /// The first 64 KiB and, for larger files, the last 4 KiB.
    File(Bytes, Option<Bytes>),
    Link(Bytes),
    Other,
}

type Tree = BTreeMap<String, (Attr, Content)>;

fn pread_n(s: &dyn Sys, fd: Fd, n: usize, off: i64) -> Bytes {
    let mut buf = vec![0; n];
    let got = s.pread(fd, &mut buf, off).expect("pread");
    buf.truncate(got);
    Bytes(buf)
}

/// Walks the tree from `/` as root (absolute paths; stat before reading, as reading stamps
/// atime).
fn walk(s: &dyn Sys) -> Tree {
    let mut tree = Tree::new();
    let mut todo = vec![String::from("/")];
    while let Some(path) = todo.pop() {
        let st = s.lstat(path.as_bytes()).expect("lstat");
        let content = match st.st_mode & S_IFMT {
            S_IFDIR => {
                for n in s.ls(path.as_bytes()).expect("ls") {
                    let sep = if path == "/" { "" } else { "/" };
                    todo.push(format!("{path}{sep}{n}"));
                }
                Content::Dir
            }
            S_IFREG => {
                let fd = s.open(path.as_bytes(), RO, 0).expect("open");
                let head = pread_n(s, fd, 64 << 10, 0);
                let tail = (st.st_size > 64 << 10).then(|| pread_n(s, fd, 4096, st.st_size - 4096));
                s.close(fd).unwrap();
                Content::File(head, tail)
            }
            S_IFLNK => Content::Link(Bytes(s.readlink(path.as_bytes()).expect("readlink"))),
            _ => Content::Other,
        };
        tree.insert(path, (attr(st), content));
    }
    tree
}

// ---------------------------------------------------------------------------------------
// running a program

/// One side: its tasks by index.
trait Runner {
    fn exec(&mut self, task: usize, op: &Op, fds: &[i32]) -> Out;
    /// Adds a task made from `parent` (see `Op::Spawn`).
    fn spawn(&mut self, parent: usize, fork: bool, who: Who);
    fn tree(&mut self) -> Tree;
}

/// The results of a run: the tasks that ran each step, their results, the final tree.
struct Run {
    tasks: Vec<usize>,
    outs: Vec<Out>,
    tree: Tree,
}

fn run(r: &mut dyn Runner, prog: &Program) -> Run {
    // Open descriptors per fd table, and each task's table.
    let mut tables: Vec<BTreeSet<i32>> = vec![BTreeSet::new()];
    let mut table_of: Vec<usize> = vec![0];
    let mut run = Run {
        tasks: Vec::new(),
        outs: Vec::new(),
        tree: Tree::new(),
    };
    for step in &prog.0 {
        let task = step.task as usize % table_of.len();
        let o = match step.op {
            Op::Spawn { .. } if table_of.len() == MAX_TASKS => Out::Skip("too many tasks"),
            Op::Spawn { fork, who } => {
                r.spawn(task, fork, who);
                let table = if fork {
                    tables.push(tables[table_of[task]].clone());
                    tables.len() - 1
                } else {
                    table_of[task]
                };
                table_of.push(table);
                Out::Spawned(table_of.len() - 1)
            }
            ref op => {
                let open = &mut tables[table_of[task]];
                let fds: Vec<i32> = open.iter().copied().collect();
                let o = r.exec(task, op, &fds);
                match o {
                    Out::Fd(n) => {
                        open.insert(n);
                    }
                    Out::Closed(n) => {
                        open.remove(&n);
                    }
                    _ => {}
                }
                o
            }
        };
        run.tasks.push(task);
        run.outs.push(o);
    }
    run.tree = r.tree();
    run
}

/// uvfs: one `Task` per task over one tmpfs (or one hostfs).
struct UvfsRunner {
    tasks: Vec<Uvfs>,
}

impl UvfsRunner {
    fn new() -> UvfsRunner {
        UvfsRunner {
            tasks: vec![Uvfs::new()],
        }
    }

    /// Over a fresh hostfs on a fresh host tmpfs (`common`'s `Uvfs::hostfs`).
    fn hostfs() -> UvfsRunner {
        UvfsRunner {
            tasks: vec![Uvfs::hostfs(None, "")],
        }
    }
}

impl Runner for UvfsRunner {
    fn exec(&mut self, task: usize, op: &Op, fds: &[i32]) -> Out {
        exec(&mut self.tasks[task], op, fds)
    }
    fn spawn(&mut self, parent: usize, fork: bool, who: Who) {
        let p = &self.tasks[parent];
        let task = if fork {
            p.task.fork()
        } else {
            p.task.clone_thread()
        };
        let mut t = Uvfs {
            task,
            mnt: p.mnt.clone(),
            host: p.host.clone(),
            server: None,
        };
        let (uid, gid, groups) = who.ids();
        t.set_cred(uid, gid, groups);
        self.tasks.push(t);
    }
    fn tree(&mut self) -> Tree {
        let root = Uvfs {
            task: uvfs::Task::init(&self.tasks[0].mnt),
            mnt: self.tasks[0].mnt.clone(),
            host: self.tasks[0].host.clone(),
            server: None,
        };
        walk(&root as &dyn Sys)
    }
}

/// A request to a host task's thread.
enum Cmd {
    Exec(Op, Vec<i32>, Sender<Out>),
    Spawn(bool, Who, Sender<Worker>),
}

/// A host task: a thread of the sandbox (see `common`) serving [`Cmd`]s.
struct Worker {
    tx: Sender<Cmd>,
    join: std::thread::JoinHandle<()>,
}

/// Starts a task thread from the calling thread: it shares the caller's fd table and fs
/// context (`pthread_create`), then for `fork` unshares both, copying them as they are now.
fn spawn_worker(fork: bool, who: Who) -> Worker {
    let (tx, rx) = channel::<Cmd>();
    let (ready_tx, ready_rx) = channel();
    let join = std::thread::spawn(move || {
        if fork {
            // SAFETY: a plain system call on this thread's own context.
            assert_eq!(
                unsafe { libc::unshare(libc::CLONE_FS | libc::CLONE_FILES) },
                0
            );
        }
        let mut host = Host;
        let (uid, gid, groups) = who.ids();
        host.set_cred(uid, gid, groups);
        ready_tx.send(()).unwrap();
        for cmd in rx {
            match cmd {
                Cmd::Exec(op, fds, reply) => reply.send(exec(&mut host, &op, &fds)).unwrap(),
                Cmd::Spawn(fork, who, reply) => reply.send(spawn_worker(fork, who)).unwrap(),
            }
        }
    });
    ready_rx.recv().expect("task thread started");
    Worker { tx, join }
}

/// Linux: one thread per task inside the sandbox thread's process.
struct HostRunner {
    workers: Vec<Worker>,
}

impl Runner for HostRunner {
    fn exec(&mut self, task: usize, op: &Op, fds: &[i32]) -> Out {
        let (tx, rx) = channel();
        self.workers[task]
            .tx
            .send(Cmd::Exec(op.clone(), fds.to_vec(), tx))
            .unwrap();
        // A call that blocks on Linux (an operation the generator should not make) fails the
        // case instead of hanging the test; the blocked thread is left behind.
        rx.recv_timeout(std::time::Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("task {task}: {op:?} did not return on Linux: {e}"))
    }
    fn spawn(&mut self, parent: usize, fork: bool, who: Who) {
        let (tx, rx) = channel();
        self.workers[parent]
            .tx
            .send(Cmd::Spawn(fork, who, tx))
            .unwrap();
        self.workers.push(rx.recv().expect("task thread died"));
    }
    fn tree(&mut self) -> Tree {
        // This (sandbox) thread shares task 0's fs context: root is the sandbox.
        walk(&Host as &dyn Sys)
    }
}

impl HostRunner {
    fn finish(self) {
        let joins: Vec<_> = self.workers.into_iter().map(|w| w.join).collect();
        // The senders are gone: each thread's loop ends.
        for j in joins {
            j.join().expect("task thread panicked");
        }
    }
}

fn run_host(prog: &Program) -> Option<Run> {
    on_host(&|_| {
        let mut h = HostRunner {
            workers: vec![spawn_worker(false, Who::Root)],
        };
        let r = run(&mut h, prog);
        h.finish();
        r
    })
}

// ---------------------------------------------------------------------------------------
// checking

/// A side-by-side trace of a program's results, the first difference marked.
fn report(prog: &Program, u: &Run, h: &Run) -> String {
    let mut s = String::new();
    let mut marked = false;
    for (i, step) in prog.0.iter().enumerate() {
        let (uo, ho) = (&u.outs[i], &h.outs[i]);
        let mark = if uo != ho && !marked {
            marked = true;
            ">>"
        } else {
            "  "
        };
        s += &format!(
            "{mark}{i:2} t{}: {:?}\n      uvfs:  {uo:?}\n",
            u.tasks[i], step.op
        );
        if uo != ho {
            s += &format!("      linux: {ho:?}\n");
        }
    }
    let keys: BTreeSet<&String> = u.tree.keys().chain(h.tree.keys()).collect();
    for k in keys {
        let (a, b) = (u.tree.get(k), h.tree.get(k));
        if a != b {
            s += &format!("tree {k}:\n      uvfs:  {a:?}\n      linux: {b:?}\n");
        }
    }
    s
}

/// uvfs-only invariants (no host): consistent link counts and sizes in the final tree.
fn check_tree_invariants(tree: &Tree) -> Result<(), String> {
    for (path, (a, c)) in tree {
        match c {
            Content::Dir => {
                let prefix = if path == "/" {
                    "/".to_string()
                } else {
                    format!("{path}/")
                };
                let subdirs = tree
                    .iter()
                    .filter(|(p, (_, c))| {
                        p.strip_prefix(&prefix)
                            .is_some_and(|rest| !rest.is_empty() && !rest.contains('/'))
                            && *c == Content::Dir
                    })
                    .count() as u64;
                if a.nlink != 2 + subdirs {
                    return Err(format!(
                        "{path}: nlink {} with {subdirs} subdirectories",
                        a.nlink
                    ));
                }
            }
            Content::File(head, None) if head.0.len() as i64 != a.size => {
                return Err(format!(
                    "{path}: size {} but {} bytes read",
                    a.size,
                    head.0.len()
                ));
            }
            _ => {}
        }
        if a.mode.0 & S_IFMT == S_IFLNK && a.mode.0 & 0o777 != 0o777 {
            return Err(format!("{path}: symlink mode {:?}", a.mode));
        }
    }
    Ok(())
}

/// With `UVFS_PROPTEST_STATS=1`: how often each operation gave each kind of result, to see
/// what the generator reaches (printed at the end).
static STATS: std::sync::Mutex<BTreeMap<(String, String), u32>> =
    std::sync::Mutex::new(BTreeMap::new());

fn stats_wanted() -> bool {
    std::env::var_os("UVFS_PROPTEST_STATS").is_some_and(|v| v != "0")
}

fn record_stats(prog: &Program, outs: &[Out]) {
    let mut st = STATS.lock().unwrap();
    for (step, o) in prog.0.iter().zip(outs) {
        let op = format!("{:?}", step.op);
        let op = op.split(['(', ' ']).next().unwrap_or("").to_string();
        let res = match o {
            Out::Err(e) => format!("{e:?}"),
            Out::Skip(_) => "skip".into(),
            _ => "ok".into(),
        };
        *st.entry((op, res)).or_default() += 1;
    }
}

fn print_stats() {
    let st = STATS.lock().unwrap();
    let mut last = "";
    let mut line = String::new();
    for ((op, res), n) in st.iter() {
        if op != last {
            if !line.is_empty() {
                eprintln!("{line}");
            }
            line = format!("{op:>10}:");
            last = op;
        }
        line += &format!(" {res} {n}");
    }
    eprintln!("{line}");
}

fn check(prog: &Program) -> Result<(), TestCaseError> {
    let u = run(&mut UvfsRunner::new(), prog);
    if stats_wanted() {
        record_stats(prog, &u.outs);
    }
    let hf = hostfs_enabled().then(|| run(&mut UvfsRunner::hostfs(), prog));
    match run_host(prog) {
        Some(h) => {
            if u.outs != h.outs || u.tree != h.tree {
                return Err(TestCaseError::fail(format!(
                    "uvfs differs from Linux:\n{}",
                    report(prog, &u, &h)
                )));
            }
            if let Some(hf) = hf.filter(|hf| hf.outs != h.outs || hf.tree != h.tree) {
                return Err(TestCaseError::fail(format!(
                    "hostfs (as uvfs) differs from Linux:\n{}",
                    report(prog, &hf, &h)
                )));
            }
        }
        None => {
            let again = run(&mut UvfsRunner::new(), prog);
            if u.outs != again.outs || u.tree != again.tree {
                return Err(TestCaseError::fail(format!(
                    "uvfs is not deterministic:\n{}",
                    report(prog, &u, &again)
                )));
            }
            check_tree_invariants(&u.tree).map_err(TestCaseError::fail)?;
            if let Some(hf) = hf.filter(|hf| hf.outs != u.outs || hf.tree != u.tree) {
                return Err(TestCaseError::fail(format!(
                    "hostfs (as uvfs) differs from uvfs tmpfs:\n{}",
                    report(prog, &hf, &u)
                )));
            }
        }
    }
    Ok(())
}

fn config() -> Config {
    // `Config::default()` reads the PROPTEST_* variables (PROPTEST_RNG_SEED among them).
    let c = Config::default();
    let rng_seed = match c.rng_seed {
        RngSeed::Random => RngSeed::Fixed(DEFAULT_SEED),
        fixed => fixed,
    };
    Config {
        cases: std::env::var("UVFS_PROPTEST_CASES")
            .ok()
            .map(|v| v.parse().expect("UVFS_PROPTEST_CASES: a number"))
            .unwrap_or(DEFAULT_CASES),
        rng_seed,
        failure_persistence: None,
        // Bound shrinking (milliseconds) so that a failure reports in reasonable time.
        max_shrink_time: 120_000,
        ..c
    }
}

#[test]
fn differential() {
    let c = config();
    if host_available() {
        eprintln!("differential: {} programs, seed {}", c.cases, c.rng_seed);
    } else {
        eprintln!(
            "differential: SKIPPING the comparison with Linux (needs root, and UVFS_NO_HOST \
             unset); checking uvfs-only invariants on {} programs, seed {}",
            c.cases, c.rng_seed
        );
    }
    let mut runner = TestRunner::new(c);
    let r = runner.run(&program(), |p| check(&p));
    if stats_wanted() {
        print_stats();
    }
    match r {
        Ok(()) => {}
        Err(TestError::Fail(why, prog)) => {
            panic!("minimal failing program:\n{prog:?}\n{why}")
        }
        Err(e) => panic!("{e}"),
    }
}
