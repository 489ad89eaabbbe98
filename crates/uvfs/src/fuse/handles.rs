//! The FUSE server's file handles: descriptors in tables of one worker thread and one
//! caller uid, and a server-wide count that caps them.
//!
//! Linux analogue: a process's descriptor table, capped by `RLIMIT_NOFILE` (fs/file.c
//! `alloc_fd`: `EMFILE`), and the system-wide count of open files, capped by `fs.file-max`
//! (fs/file_table.c `alloc_empty_file`: `ENFILE`, which a caller with `CAP_SYS_ADMIN`
//! passes; `nr_files` is a `percpu_counter`).
//!
//! # Why a table per caller
//! Every caller of an `--allow-other` mount opens through the one server. With one table per
//! worker shared by all callers, one ordinary user holding 2^20 handles (54 processes, each
//! under its own descriptor limit) made every later open on the mount fail with `EMFILE`,
//! root's included (issue 15 item 1). So a handle goes into the table of its (worker, caller
//! uid) pair, made at that pair's first open and capped at
//! [`FuseOptions::max_handles_per_user`](super::FuseOptions::max_handles_per_user) (by
//! default 2^20, `nr_open`, the most one Linux process may hold, or less so that one user's
//! tables on all workers hold at most half of the total below): a user who fills it gets
//! `EMFILE` itself and no other caller notices. What one user can do to the others is
//! bounded by [`FuseOptions::max_handles`](super::FuseOptions::max_handles) (Linux's
//! default `fs.file-max` for this machine's RAM, by default): past it, handles and tables
//! for callers other than root fail with `ENFILE`, as opens past `file-max` do on Linux.
//! Each condition is reported on stderr, at most once a minute per condition (Linux prints
//! its "VFS: file-max limit reached" only when the count passes the one last reported; a
//! time limit also bounds the lines of a user who opens and closes at the limit).
//!
//! # No shared written line
//! A handle names its table (`fh = table << 32 | fd`). A worker keeps a thread of each
//! table's owner task it has used, so `read`, `write` and `release` find the `File` with
//! [`FdTable::fget`](crate::FdTable::fget) (no lock) on any worker; an open or a release
//! writes its table's lines and its own worker's line of the count, which is added to the
//! shared total once per [`BATCH`] handles (Linux's `percpu_counter`). Only a worker's
//! first use of a table takes the registry lock.
//!
//! Lock order: `Handles::reg` -> the base task's `FdTable::file_lock` (a new table is a
//! fork of the base task); `HandleCount::fold` is a leaf.

use std::collections::HashMap;
use std::io::Write as _;
use std::time::Instant;

use crate::errno::{Errno, Result};
use crate::fdtable::NR_OPEN;
use crate::file::FileHandle;
use crate::sync::padded::CacheLine;
use crate::sync::plain::{AtomicI64, AtomicU64, Mutex, Ordering};
use crate::sync::plock;
use crate::task::Task;
use crate::types::Fd;

/// How far a worker's share of the count may drift before it is added to the total
/// (`percpu_counter_batch`).
pub(super) const BATCH: i64 = 32;

/// Seconds between two reports of one condition.
const REPORT_EVERY: u64 = 60;

/// Linux's smallest `fs.file-max` (`NR_FILE`).
const NR_FILE: u64 = 8192;

/// Linux's default `fs.file-max` for a machine of this one's RAM: one file per 10 KiB
/// (fs/file_table.c `files_maxfiles_init`, which counts the pages free at boot; uvfs counts
/// all of RAM), at least 8192.
pub fn default_max_handles() -> u64 {
    // 4 KiB pages: 4 KiB each, a file per 10 KiB.
    (crate::fs::tmpfs::ram_pages().0 * 4 / 10).max(NR_FILE)
}

/// The default limit per (worker, uid) table: 2^20 (`nr_open`), or less so that one uid's
/// tables on all `workers` hold at most half of `max` (0: no limit), at least 1. One
/// ordinary user must not be able to fill the server's total alone: with a table per worker,
/// 2^20 each would let it on a machine with many CPUs and little RAM.
pub(super) fn default_per_user(workers: usize, max: u64) -> u32 {
    if max == 0 {
        return NR_OPEN;
    }
    let share = max / 2 / workers.max(1) as u64;
    share.clamp(1, u64::from(NR_OPEN)) as u32
}

/// A count split per worker, so that adding to it writes the worker's own line
/// (Linux `struct percpu_counter`).
struct HandleCount {
    /// What the workers have added so far. Atomic; written only under `fold`.
    total: CacheLine<AtomicI64>,
    /// Taken to add a worker's share to `total` and to read the exact sum.
    fold: Mutex<()>,
    /// Each worker's share not yet in `total` (`|share| < BATCH`). Atomic; written by its
    /// worker, and zeroed under `fold`.
    shares: Box<[CacheLine<AtomicI64>]>,
}

impl HandleCount {
    fn new(workers: usize) -> HandleCount {
        HandleCount {
            total: CacheLine(AtomicI64::new(0)),
            fold: Mutex::new(()),
            shares: (0..workers.max(1))
                .map(|_| CacheLine(AtomicI64::new(0)))
                .collect(),
        }
    }

    /// Adds `n` on behalf of worker `w` (`percpu_counter_add_batch`).
    fn add(&self, w: usize, n: i64) {
        let share = &self.shares[w % self.shares.len()];
        // Relaxed: a count; it orders no other memory (the handles are the tables').
        if (share.fetch_add(n, Ordering::Relaxed) + n).abs() >= BATCH {
            let _g = plock(&self.fold);
            // Relaxed (both): under `fold`, which `sum` also takes, so it never sees the
            // share in both places or in neither.
            let s = share.swap(0, Ordering::Relaxed);
            self.total.fetch_add(s, Ordering::Relaxed);
        }
    }

    /// The total without the workers' shares: off by less than `BATCH` per worker
    /// (`percpu_counter_read`).
    fn approx(&self) -> i64 {
        // Relaxed: an estimate; `sum` decides.
        self.total.load(Ordering::Relaxed)
    }

    /// The total with every share (`percpu_counter_sum`).
    fn sum(&self) -> i64 {
        let _g = plock(&self.fold);
        // Relaxed (both): `fold` excludes the moves from shares to `total`; adds that run
        // meanwhile are counted or not, as with any count read while it changes.
        let shares: i64 = self.shares.iter().map(|s| s.load(Ordering::Relaxed)).sum();
        self.total.load(Ordering::Relaxed) + shares
    }
}

/// The tables, behind `Handles::reg`.
struct Registry {
    /// Root credentials, umask 0, an empty table: new tables are forks of it, and the workers'
    /// tasks for requests that open nothing are threads of it.
    base: Task,
    /// Table number -> its owner task; workers use threads of it. Tables stay for the
    /// server's life (a worker may still hold a thread of one), so numbers are never reused.
    owners: Vec<Task>,
    /// (worker, caller uid) -> table number.
    by_caller: HashMap<(usize, u32), usize>,
    /// Table number -> seconds after the server's start before which its `EMFILE` is not
    /// reported again. Here, not per thread: threads past `--threads` share a worker's
    /// tables (the io_uring transport's `/dev/fuse` reader), and each reported it once.
    emfile_due: HashMap<usize, u64>,
}

/// The server's file handles: the tables, the count, the limits.
///
/// # Invariants
/// Every installed descriptor of every table was counted once in `count` (by
/// [`Opener::open`]), and is uncounted once when it is closed ([`Handles::close`]).
pub(super) struct Handles {
    reg: Mutex<Registry>,
    /// Handles open now, in all tables.
    count: HandleCount,
    /// `RLIMIT_NOFILE` of each table (1 ..= 2^20). Immutable after init.
    per_user: u32,
    /// The most handles (and the most tables) for callers other than root; 0: no limit.
    /// Immutable after init.
    max: u64,
    /// When the server started (for the report times).
    start: Instant,
    /// Seconds after `start` before which `ENFILE` is not reported again. Atomic; written by
    /// the request that reports it.
    next_enfile_report: AtomicU64,
}

impl Handles {
    /// Tables forked from `base`, each with `RLIMIT_NOFILE` `per_user` (clamped to 1 ..=
    /// 2^20; `None`: see [`default_per_user`]), for `workers` workers; at most `max` handles
    /// and `max` tables in all for callers other than root (0: no limit).
    pub(super) fn new(base: Task, workers: usize, per_user: Option<u32>, max: u64) -> Handles {
        let per_user = per_user.unwrap_or_else(|| default_per_user(workers, max));
        Handles {
            reg: Mutex::new(Registry {
                base,
                owners: Vec::new(),
                by_caller: HashMap::new(),
                emfile_due: HashMap::new(),
            }),
            count: HandleCount::new(workers),
            per_user: per_user.clamp(1, NR_OPEN),
            max,
            start: Instant::now(),
            next_enfile_report: AtomicU64::new(0),
        }
    }

    /// Handles open now (exact when no open or release runs meanwhile).
    pub(super) fn open_count(&self) -> u64 {
        self.count.sum().max(0) as u64
    }

    /// Seconds since the server started.
    fn now(&self) -> u64 {
        self.start.elapsed().as_secs()
    }

    /// Whether the count `n()` (of handles, or of tables) has reached `max` for a caller
    /// other than root, reporting it when due.
    fn over(&self, uid: u32, n: impl FnOnce() -> i64) -> bool {
        if uid == 0 || self.max == 0 {
            return false;
        }
        if n() < i64::try_from(self.max).unwrap_or(i64::MAX) {
            return false;
        }
        if self.enfile_report_due() {
            let _ = writeln!(
                std::io::stderr(),
                "uvfs: {} file handles or tables in use, the server's limit \
                 (--max-handles): opens by users other than root fail with ENFILE",
                self.max
            );
        }
        true
    }

    /// Whether `ENFILE` may be reported now; if so, the next report is due in a minute.
    #[cold]
    fn enfile_report_due(&self) -> bool {
        let now = self.now();
        let next = &self.next_enfile_report;
        // Relaxed: a report time; it orders nothing else (a lost race only skips a
        // duplicate line).
        let due = next.load(Ordering::Relaxed);
        // Relaxed (both): as above.
        let relaxed = Ordering::Relaxed;
        now >= due
            && next
                .compare_exchange(due, now + REPORT_EVERY, relaxed, relaxed)
                .is_ok()
    }

    /// A thread of the base task (for requests that open nothing).
    pub(super) fn base_thread(&self) -> Task {
        plock(&self.reg).base.clone_thread()
    }

    /// The number of the table worker `worker` opens caller `uid`'s files into, made now
    /// if there is none yet.
    ///
    /// # Errors
    /// `ENFILE` if the server has `max` tables and `uid` is not root.
    #[cold]
    pub(super) fn table(&self, worker: usize, uid: u32) -> Result<usize> {
        let mut reg = plock(&self.reg);
        if let Some(&n) = reg.by_caller.get(&(worker, uid)) {
            return Ok(n);
        }
        let tables = reg.owners.len();
        if self.over(uid, || tables as i64) || tables >= u32::MAX as usize {
            return Err(Errno::ENFILE);
        }
        let t = reg.base.fork();
        // Cannot fail: at most 2^20.
        let _ = t.setrlimit_nofile(self.per_user);
        reg.owners.push(t);
        reg.by_caller.insert((worker, uid), tables);
        Ok(tables)
    }

    /// A thread of table `n`'s owner task.
    ///
    /// # Errors
    /// `EBADF` if there is no table `n` (a forged file handle).
    #[cold]
    pub(super) fn thread(&self, n: usize) -> Result<Task> {
        plock(&self.reg)
            .owners
            .get(n)
            .map(Task::clone_thread)
            .ok_or(Errno::EBADF)
    }

    /// `close(fd)` on `t` (a thread of a table's owner), uncounting the handle on behalf of
    /// worker `worker`.
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open.
    pub(super) fn close(&self, t: &Task, worker: usize, fd: Fd) -> Result<()> {
        t.close(fd)?;
        self.count.add(worker, -1);
        Ok(())
    }
}

/// Opens files for one request into the table of its worker and caller.
pub(super) struct Opener<'a> {
    /// The server's handles.
    pub(super) handles: &'a Handles,
    /// The worker the request runs on.
    pub(super) worker: usize,
    /// The caller's uid.
    pub(super) uid: u32,
    /// The table's number (for its `EMFILE` report, `Registry::emfile_due`).
    pub(super) table: usize,
}

impl Opener<'_> {
    /// Runs `open` with a descriptor already reserved in `t`'s table and counted, and installs
    /// the file there, as `openat` does (`get_unused_fd_flags` before the walk): when the
    /// table or the server is full, nothing is opened, created or truncated.
    ///
    /// # Errors
    /// `EMFILE` if the caller holds [`FuseOptions::max_handles_per_user`](
    /// super::FuseOptions::max_handles_per_user) handles in this worker's table; `ENFILE` if
    /// the server holds [`FuseOptions::max_handles`](super::FuseOptions::max_handles) and the
    /// caller is not root; `open`'s.
    pub(super) fn open(
        &mut self,
        t: &Task,
        open: impl FnOnce() -> Result<FileHandle>,
    ) -> Result<Fd> {
        let h = self.handles;
        let near =
            h.max != 0 && h.count.approx() + BATCH * h.count.shares.len() as i64 >= h.max as i64;
        if near && h.over(self.uid, || h.count.sum()) {
            return Err(Errno::ENFILE);
        }
        let fd = match t.fd_table().alloc_fd(0, false) {
            Ok(fd) => fd,
            Err(Errno::EMFILE) => {
                self.report_emfile();
                return Err(Errno::EMFILE);
            }
            Err(e) => return Err(e),
        };
        h.count.add(self.worker, 1);
        match open() {
            Ok(f) => {
                t.fd_table().fd_install(fd, f);
                Ok(Fd(fd as i32))
            }
            Err(e) => {
                t.fd_table().put_unused_fd(fd);
                h.count.add(self.worker, -1);
                Err(e)
            }
        }
    }

    /// `close(fd)` of a handle this request opened (see [`Handles::close`]).
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open.
    pub(super) fn close(&self, t: &Task, fd: Fd) -> Result<()> {
        self.handles.close(t, self.worker, fd)
    }

    /// Reports, when due, that the caller's table is full.
    #[cold]
    fn report_emfile(&mut self) {
        let now = self.handles.now();
        {
            let mut reg = plock(&self.handles.reg);
            let due = reg.emfile_due.entry(self.table).or_insert(0);
            if now < *due {
                return;
            }
            *due = now + REPORT_EVERY;
        }
        let _ = writeln!(
            std::io::stderr(),
            "uvfs: uid {} holds {} file handles on worker {}, the limit per user and worker \
             (--max-handles-per-user): its opens there fail with EMFILE",
            self.uid,
            self.handles.per_user,
            self.worker
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_sums_shares_of_every_worker() {
        let c = HandleCount::new(3);
        for i in 0..1000 {
            c.add(i % 3, 1);
        }
        // Releases on other workers than the opens: shares go negative, the sum stays right.
        for i in 0..400 {
            c.add((i + 1) % 3, -1);
        }
        assert_eq!(c.sum(), 600);
        assert!((c.approx() - 600).abs() < BATCH * 3, "{}", c.approx());
    }

    #[test]
    fn one_user_cannot_reach_the_total_by_default() {
        assert_eq!(default_per_user(2, 0), NR_OPEN, "no total: nr_open");
        assert_eq!(default_per_user(2, 1 << 30), NR_OPEN, "RAM enough: nr_open");
        // 16 workers, 3.3M in all (32 GB): 103k per table, half of the total per user.
        assert_eq!(default_per_user(16, 3_300_000), 103_125);
        assert_eq!(default_per_user(4, 3), 1, "at least one");
    }

    fn open(h: &Handles, t: &Task, worker: usize, uid: u32, f: &FileHandle) -> Result<Fd> {
        let mut o = Opener {
            handles: h,
            worker,
            uid,
            table: 0,
        };
        o.open(t, || Ok(f.clone()))
    }

    /// Bug (issue 15 item 1): one user filling the shared table made everyone's opens fail
    /// with EMFILE. Now each (worker, uid) has its own table; the total gives ENFILE, which
    /// root passes.
    #[test]
    fn each_caller_has_its_own_table_and_the_server_a_total() {
        let mnt = crate::tmpfs::mount(Default::default());
        let base = Task::init(&mnt);
        let f = base
            .filp_open(Fd::AT_FDCWD, b"/f", crate::OpenFlags::CREAT, 0o644)
            .unwrap();
        let h = Handles::new(base.fork(), 2, Some(4), 10);
        let (a, b, root) = (
            h.table(0, 1000).unwrap(),
            h.table(0, 1001).unwrap(),
            h.table(0, 0).unwrap(),
        );
        assert_eq!(h.table(0, 1000), Ok(a), "made once");
        assert_ne!(a, b);
        let (ta, tb, troot) = (
            h.thread(a).unwrap(),
            h.thread(b).unwrap(),
            h.thread(root).unwrap(),
        );
        for _ in 0..4 {
            open(&h, &ta, 0, 1000, &f).unwrap();
        }
        assert_eq!(open(&h, &ta, 0, 1000, &f), Err(Errno::EMFILE));
        // Another user is not affected; it fills the server's total (10).
        let fds: Vec<Fd> = (0..4)
            .map(|_| open(&h, &tb, 0, 1001, &f).unwrap())
            .collect();
        let c = h.table(1, 1001).unwrap();
        let tc = h.thread(c).unwrap();
        open(&h, &tc, 1, 1001, &f).unwrap();
        open(&h, &tc, 1, 1001, &f).unwrap();
        assert_eq!(h.open_count(), 10);
        assert_eq!(open(&h, &tc, 1, 1001, &f), Err(Errno::ENFILE));
        // Root passes the total, as CAP_SYS_ADMIN passes file-max.
        open(&h, &troot, 0, 0, &f).unwrap();
        // A release (on another worker than the open) makes room again.
        h.close(&tb, 1, fds[0]).unwrap();
        assert_eq!(h.close(&tb, 1, fds[0]), Err(Errno::EBADF), "counted once");
        assert_eq!(h.open_count(), 10);
        h.close(&tb, 1, fds[1]).unwrap();
        open(&h, &tc, 1, 1001, &f).unwrap();
        assert_eq!(h.thread(99).err(), Some(Errno::EBADF));
    }
}
