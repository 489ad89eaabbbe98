//! The FUSE-over-io_uring transport: after the INIT handshake on `/dev/fuse`, one io_uring
//! per queue the kernel keeps (`num_possible_cpus`), its worker thread pinned to the CPUs
//! whose requests land in that queue, holding [`RING_DEPTH`] entries that the kernel fills
//! with requests; each is served in place ([`UvfsFuse::serve_uring_entry`]) and handed back
//! with `COMMIT_AND_FETCH`, which also waits for the next request. A classic reader beside
//! the rings serves `/dev/fuse`: `FORGET` and `INTERRUPT` always come that way
//! (`fuse_io_uring_ops`), and every request does if the kernel refuses the rings.
//!
//! Linux analogue: the server side of fs/fuse/dev_uring.c (`fuse_uring_cmd`,
//! `fuse_uring_register`, `fuse_uring_commit_fetch`); libfuse 3.18 lib/fuse_uring.c.
//!
//! # Why this shape
//! - INIT is answered here, not by fuser: the reply must carry `FUSE_OVER_IO_URING`, which
//!   fuser 0.18 does not offer. So this transport reads `/dev/fuse` itself through
//!   [`UvfsFuse::dispatch`] (`dev.rs`'s readers: one after the rings are up, when it carries
//!   only forgets and interrupts, as many as [`serve_dev`](super::serve_dev) has if the
//!   kernel refused them). An interrupt read there finds its request on whichever ring
//!   serves it (`fuse/serve_intr.rs`). A worker's slot there is a batch reader's,
//!   registered before its first read and told of each `io_uring_enter`: the kernel marks
//!   a request sent (`FR_SENT`, so its interrupt may come) when it puts it in an entry,
//!   and the worker serves what one enter fetched one request after another, so a request
//!   may wait, sent, behind one that blocks; its interrupt stays pending until the worker
//!   starts it ("Batches" there). Open: the commits of a batch are submitted only once it
//!   is all served, so the answer of a request served before one that blocks waits for
//!   that one too (its caller, even killed, waits with it).
//! - The SQEs are built with the `io-uring` crate and `sqe->len` (2 iovecs) is set through
//!   the entry's bytes (`abi::sqe`): the crate's `UringCmd80` has no `len`. rustix's raw
//!   `io_uring` would mean mapping and driving the rings by hand.
//! - Queues: the kernel makes `num_possible_cpus()` of them, ids `0..n`, and puts a
//!   request in queue `task_cpu(issuer)`, or in queue 0 where that CPU id is `n` or more
//!   (a sparse possible mask; `fuse_uring_task_to_queue`). It uses the rings only once
//!   every queue has an entry (`is_ring_ready`), so each gets a worker; the worker is
//!   pinned to the CPUs that feed its queue (best effort: an offline CPU cannot be pinned
//!   to; a queue no CPU feeds is left unpinned).
//!
//! # Invariants
//! - An entry's buffers (header, payload) and its iovec pair are boxed, never move or
//!   shrink, and outlive every command that names them: the kernel may write the buffers
//!   from a command's issue until its completion is posted (the issue itself, inside this
//!   worker's `io_uring_enter`, when a COMMIT_AND_FETCH finds a request queued:
//!   `fuse_uring_next_fuse_req`; or task work that io_uring runs in this worker's
//!   `io_uring_enter`, `IORING_SETUP_DEFER_TASKRUN`: `fuse_uring_send_in_task`), and
//!   reads them in a commit's issue. The worker touches them only between a reaped
//!   completion and the entry's next command. Every way out of a worker, a panic included,
//!   goes through [`Queue`]'s drop, which leaks the buffers rather than free them while
//!   any entry may still have a command in the kernel, or after a panic.
//! - Errors: a completion with `ENOTCONN`, `ECONNABORTED` or `ENODEV` (teardown:
//!   `fuse_uring_teardown_entries`, `fuse_uring_cancel`, an aborted connection) retires the
//!   entry quietly; any other error re-sends the entry's last command, at most
//!   [`MAX_RETRIES`] times in a row with a growing pause, and then aborts the connection
//!   (through the caller's [`AbortConn`], which logs why): an entry left idle would stall
//!   its CPU's requests for good. So does a request whose commit id is missing or 0.
//! - The worker leaves once none of its entries has a command in the kernel. The reader
//!   leaves at `ENODEV` or `ECONNABORTED`; the workers are joined after it, so every way
//!   the session ends has someone reading `/dev/fuse` until the connection is gone.
//!
//! No locks; the per-queue request counts are the workers' own until they are joined.
//! The `unsafe` here is the ring's syscall glue (pushing SQEs that name buffers the kernel
//! will write), as the run supervisor's; the SQE's layout is `abi::sqe`'s.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use zerocopy::{FromBytes, IntoBytes};

use super::dev::{dev_readers, reader_count, serve_until_init};
use super::{abi, UringScratch, UvfsFuse, URING_HEADER_SIZE};

/// Entries per queue (libfuse's default queue depth is 8; each costs a 1 MiB payload).
pub const RING_DEPTH: usize = 4;

/// How many times in a row one entry's failed command is sent again before the worker
/// gives up on the connection and aborts it.
pub const MAX_RETRIES: u32 = 4;

/// Aborts the FUSE connection being served (e.g. through fusectl's
/// `/sys/fs/fuse/connections/N/abort`), given the one-line reason, which it logs. Called
/// when the rings cannot go on (a command failing past [`MAX_RETRIES`], a protocol
/// error, a panicking worker) and when the rings were refused and `ready` said to stop.
pub type AbortConn = Arc<dyn Fn(&str) -> io::Result<()> + Send + Sync>;

/// What a finished io_uring session served.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UringStats {
    /// Queues (one per possible CPU).
    pub queues: usize,
    /// Requests answered through the rings.
    pub ring_requests: u64,
    /// Requests answered through `/dev/fuse` (INIT, and any that came before the rings were
    /// ready or after the kernel refused them); forgets are not counted (no reply).
    pub dev_requests: u64,
    /// The connection ended by an abort (`/dev/fuse` read `ECONNABORTED`: fusectl), not by
    /// the end of the mount (`ENODEV`).
    pub aborted: bool,
}

/// How the rings came up, reported once by [`serve_uring`]'s `ready` callback.
#[derive(Debug)]
pub enum RingsUp {
    /// Every queue registered its entries: the kernel serves requests through the rings.
    Ready {
        /// The number of queues.
        queues: usize,
    },
    /// The kernel did not take the rings (the reason, for one line); requests go through
    /// `/dev/fuse` as long as the session lasts.
    Refused(String),
}

/// The possible CPUs (`/sys/devices/system/cpu/possible`, a list such as `0-3,8`), in
/// increasing order.
///
/// # Errors
/// The file cannot be read or parsed.
fn possible_cpus() -> io::Result<Vec<usize>> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    parse_cpu_list(&s)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("cpu/possible: {s:?}")))
}

/// The CPU ids of a kernel CPU list (`0-3,8,10-11`, `cpulist_parse`), sorted and without
/// repeats; `None` if it is empty, malformed or names more than 65536 CPUs (`NR_CPUS` is at
/// most 8192).
fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut ids = Vec::new();
    for part in s.trim().split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo.parse::<usize>().ok()?, hi.parse::<usize>().ok()?),
            None => {
                let n = part.parse::<usize>().ok()?;
                (n, n)
            }
        };
        if lo > hi || hi - lo >= 1 << 16 || ids.len() + (hi - lo) >= 1 << 16 {
            return None;
        }
        ids.extend(lo..=hi);
    }
    ids.sort_unstable();
    ids.dedup();
    (!ids.is_empty()).then_some(ids)
}

/// The CPUs whose requests the kernel puts in queue `qid` of `possible.len()` queues:
/// `fuse_uring_task_to_queue` takes the issuer's CPU id as the queue id, and queue 0 for
/// an id past the last queue (possible only with a sparse mask).
fn queue_cpus(possible: &[usize], qid: usize) -> Vec<usize> {
    let n = possible.len();
    possible
        .iter()
        .copied()
        .filter(|&c| c == qid || (qid == 0 && c >= n))
        .collect()
}

/// `true` if `/sys/module/fuse/parameters/enable_uring` says `Y`.
pub fn uring_enabled() -> bool {
    std::fs::read_to_string("/sys/module/fuse/parameters/enable_uring")
        .is_ok_and(|s| s.trim() == "Y")
}

/// Serves `fs` on the FUSE connection `dev` (a `/dev/fuse` descriptor, mounted, before
/// INIT) with FUSE over io_uring until the connection ends. INIT is answered by
/// [`UvfsFuse::dispatch`], which takes `FUSE_OVER_IO_URING` when the kernel offers it and
/// [`FuseOptions::over_io_uring`](super::FuseOptions::over_io_uring) is set (without it
/// the rings are refused), and `max_write` 1 MiB; then one ring per queue is registered,
/// and `ready` is told once how that went. If the kernel refuses the rings, the session
/// goes on over `/dev/fuse` ([`serve_dev`](super::serve_dev)'s reader threads) unless `ready` returns `false`: then the
/// connection is aborted through `abort` (the entries already registered come back only
/// when it ends), `/dev/fuse` is still served until it ends (if the abort failed: until
/// the caller's unmount takes effect), and this returns `Err` with the reason.
///
/// A ring that cannot go on (see the module's invariants) aborts the connection through
/// `abort` and makes this return `Err` with the reason once the session has ended.
///
/// # Errors
/// Reading or writing `/dev/fuse` fails other than at the connection's end (`ENODEV`,
/// `ECONNABORTED`); no INIT arrives; the rings were refused and `ready` said to stop; a
/// ring aborted the connection.
///
/// # References
/// Linux fs/fuse/dev_uring.c `fuse_uring_cmd`, `fuse_uring_register`,
/// `fuse_uring_commit_fetch`, `fuse_uring_abort`; libfuse 3.18 lib/fuse_uring.c.
pub fn serve_uring(
    fs: &Arc<UvfsFuse>,
    dev: OwnedFd,
    abort: AbortConn,
    mut ready: impl FnMut(&RingsUp) -> bool,
) -> io::Result<UringStats> {
    let dev = Arc::new(dev);
    let mut out = Vec::new();
    let mut stats = UringStats::default();
    // INIT first: the rings cannot be registered before the kernel has its reply
    // (`fuse_uring_cmd`: `EAGAIN` while `!fc->initialized`).
    stats.dev_requests += serve_until_init(fs, &dev, &mut out)?;
    let offered = init_has_uring(&out);
    let (workers, up) = if !offered {
        (
            Vec::new(),
            RingsUp::Refused("the kernel did not offer FUSE_OVER_IO_URING in INIT".into()),
        )
    } else {
        start_queues(fs, &dev, &abort, Faults::from_env())
    };
    let go_on = ready(&up);
    let mut refused = None;
    match &up {
        RingsUp::Ready { queues } => stats.queues = *queues,
        RingsUp::Refused(why) if !go_on => {
            // The entries already registered come back only when the connection ends,
            // and the caller's unmount ends it only when the mount's last user leaves:
            // abort it now. The reader below serves whatever arrives until it is gone.
            let _ = abort(&format!("the kernel refused the rings: {why}"));
            refused = Some(why.clone());
        }
        RingsUp::Refused(_) => {}
    }
    // The classic readers until the connection ends (one when the rings took the requests:
    // it reads only forgets and interrupts; else `dev_readers`'s count); the workers are
    // joined however it ends (after an abort their commands fail with
    // `ENOTCONN`/`ECONNABORTED`).
    let n = if matches!(up, RingsUp::Ready { .. }) {
        1
    } else {
        reader_count(fs)
    };
    let ended = dev_readers(fs, &dev, n).map(|(served, aborted)| {
        stats.dev_requests += served;
        stats.aborted = aborted;
    });
    let mut failed = None;
    for w in workers {
        match w.join() {
            Ok(end) => {
                stats.ring_requests += end.served;
                if let Some(why) = end.fatal {
                    failed.get_or_insert(why);
                }
            }
            Err(_) => {
                failed.get_or_insert_with(|| "a ring worker panicked".to_owned());
            }
        }
    }
    ended?;
    match refused.or(failed) {
        Some(why) => Err(io::Error::other(why)),
        None => Ok(stats),
    }
}

/// Whether INIT's reply in `out` took `FUSE_OVER_IO_URING`.
fn init_has_uring(out: &[u8]) -> bool {
    let h = std::mem::size_of::<abi::OutHeader>();
    out.get(h..)
        .and_then(|b| abi::InitOut::read_from_prefix(b).ok())
        .is_some_and(|(i, _)| {
            let flags = u64::from(i.flags) | (u64::from(i.flags2) << 32);
            i.flags & (abi::init::FUSE_INIT_EXT as u32) != 0
                && flags & abi::init::FUSE_OVER_IO_URING != 0
        })
}

/// Faults injected for the mount tests, from `UVFS_URING_FAULT` (comma-separated; unset
/// in any real use): `refuse=Q` (queue `Q`, or the last with `last`, registers with an
/// invalid queue id after a 1 s pause, so the kernel refuses it with `EINVAL` while a
/// request already waits for the rings), `bad-commits=N` (each worker's first `N`
/// COMMIT_AND_FETCH name an invalid queue id: the kernel fails them with `EINVAL` without
/// committing, which the retries must get past, or past [`MAX_RETRIES`] abort on).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Faults {
    refuse: Option<usize>,
    bad_commits: u32,
}

impl Faults {
    /// The faults `UVFS_URING_FAULT` asks for (none if unset or unparsable).
    fn from_env() -> Faults {
        std::env::var("UVFS_URING_FAULT")
            .ok()
            .and_then(|s| Faults::parse(&s))
            .unwrap_or_default()
    }

    /// `refuse=last` is `usize::MAX`, resolved by the worker count.
    fn parse(s: &str) -> Option<Faults> {
        let mut f = Faults::default();
        for kv in s.split(',').filter(|kv| !kv.is_empty()) {
            match kv.split_once('=')? {
                ("refuse", "last") => f.refuse = Some(usize::MAX),
                ("refuse", q) => f.refuse = Some(q.parse().ok()?),
                ("bad-commits", n) => f.bad_commits = n.parse().ok()?,
                _ => return None,
            }
        }
        Some(f)
    }
}

/// An invalid queue id (`fuse_uring_register`, `fuse_uring_commit_fetch`: `EINVAL` for
/// `qid >= ring->nr_queues`), for [`Faults`].
const BAD_QID: u16 = u16::MAX;

/// Starts one worker per queue and waits until each has registered its entries or
/// failed to. Returns the workers and the outcome.
fn start_queues(
    fs: &Arc<UvfsFuse>,
    dev: &Arc<OwnedFd>,
    abort: &AbortConn,
    mut faults: Faults,
) -> (Vec<std::thread::JoinHandle<WorkerEnd>>, RingsUp) {
    let possible = match possible_cpus() {
        Ok(p) => Arc::new(p),
        Err(e) => return (Vec::new(), RingsUp::Refused(format!("possible CPUs: {e}"))),
    };
    let n = possible.len();
    if faults.refuse == Some(usize::MAX) {
        faults.refuse = Some(n - 1);
    }
    let (tx, rx) = mpsc::channel();
    let mut workers = Vec::new();
    for qid in 0..n {
        let (fs, dev, wtx) = (fs.clone(), dev.clone(), tx.clone());
        let (abort, possible) = (abort.clone(), possible.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("uvfs-ring-{qid}"))
            .spawn(move || {
                let cpus = queue_cpus(&possible, qid);
                queue_worker(&fs, &dev, qid, &cpus, &wtx, &abort, faults)
            });
        match spawned {
            Ok(w) => workers.push(w),
            Err(e) => {
                let _ = tx.send(Err(format!("queue {qid}: cannot start a thread: {e}")));
            }
        }
    }
    drop(tx);
    let mut refused = None;
    for r in rx.iter().take(n) {
        if let Err(e) = r {
            refused.get_or_insert(e);
        }
    }
    match refused {
        None => (workers, RingsUp::Ready { queues: n }),
        Some(why) => (workers, RingsUp::Refused(why)),
    }
}

/// `struct iovec` (include/uapi/linux/uio.h: `void *iov_base; __kernel_size_t iov_len`,
/// both the size of a pointer on Linux).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Iovec {
    base: usize,
    len: usize,
}

/// The command an entry last sent (what a retry sends again).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmd {
    Register,
    /// COMMIT_AND_FETCH with this commit id.
    Commit(u64),
}

/// One entry: its buffers, the iovec pair its REGISTER names, and its state.
struct Entry {
    header: Box<[u8]>,
    payload: Box<[u8]>,
    /// Points at `header` and `payload`; read by the kernel when a REGISTER is issued,
    /// which may be after the call that pushed it (a later submit), so it lives here.
    iov: Box<[Iovec; 2]>,
    last: Cmd,
    /// The last command's failures in a row.
    failures: u32,
    /// A command of this entry was pushed and its completion not yet reaped: the kernel
    /// may write the buffers.
    in_kernel: bool,
}

impl Entry {
    fn new(payload_size: usize) -> Entry {
        let mut header = vec![0u8; URING_HEADER_SIZE].into_boxed_slice();
        let mut payload = vec![0u8; payload_size].into_boxed_slice();
        let iov = Box::new([
            Iovec {
                base: header.as_mut_ptr() as usize,
                len: header.len(),
            },
            Iovec {
                base: payload.as_mut_ptr() as usize,
                len: payload.len(),
            },
        ]);
        Entry {
            header,
            payload,
            iov,
            last: Cmd::Register,
            failures: 0,
            in_kernel: false,
        }
    }
}

/// A `fuse_uring_cmd_req` for queue `qid` as the 80-byte command of a SQE.
fn cmd_req(qid: u16, commit_id: u64) -> [u8; 80] {
    let req = abi::UringCmdReq {
        commit_id,
        qid,
        ..Default::default()
    };
    let mut cmd = [0u8; 80];
    cmd[..std::mem::size_of::<abi::UringCmdReq>()].copy_from_slice(req.as_bytes());
    cmd
}

/// Errors of a ring command that mean the connection is going or gone: the entry is
/// retired quietly (`fuse_uring_teardown_entries` and `fuse_uring_cancel` complete with
/// `ENOTCONN`; `fuse_uring_cmd` answers `ECONNABORTED` after an abort; `ENODEV` as
/// `/dev/fuse` itself says it).
fn is_teardown(errno: i32) -> bool {
    use rustix::io::Errno;
    [Errno::NOTCONN, Errno::CONNABORTED, Errno::NODEV]
        .iter()
        .any(|e| e.raw_os_error() == errno)
}

/// What a worker does about a command of one entry that completed with `-errno`.
#[derive(Debug, PartialEq, Eq)]
enum OnError {
    /// The connection is ending: forget the entry.
    Retire,
    /// Send the command again after this pause.
    Retry(Duration),
    /// [`MAX_RETRIES`] retries failed: abort the connection.
    Abort,
}

/// The policy for a failed command (`failures`: the entry's failures in a row before
/// this one, counted up here).
fn on_error(errno: i32, failures: &mut u32) -> OnError {
    if is_teardown(errno) {
        return OnError::Retire;
    }
    *failures += 1;
    if *failures > MAX_RETRIES {
        OnError::Abort
    } else {
        // 4, 16, 64, 256 ms: long enough for a transient shortage (ENOMEM, EAGAIN) to
        // pass, short enough that a stuck entry is given up in well under a second.
        OnError::Retry(Duration::from_millis(1 << (2 * *failures)))
    }
}

/// The commit id to answer an entry's request with: what `serve_uring_entry` returned,
/// unless that failed or is 0 (the kernel never sends `unique` 0 through a ring,
/// `fuse_uring_copy_to_ring`): then there is no request to commit, a protocol error.
fn commit_id(served: crate::errno::Result<u64>) -> Result<u64, String> {
    match served {
        Ok(0) => Err("an entry's commit id is 0".to_owned()),
        Ok(id) => Ok(id),
        Err(e) => Err(format!("an entry's header cannot be read ({e})")),
    }
}

/// How a worker ended: requests answered, and why it aborted the connection, if it did.
#[derive(Debug, Default)]
struct WorkerEnd {
    served: u64,
    fatal: Option<String>,
}

/// One queue's ring and entries, owned by its worker.
///
/// # Invariants
/// Dropping it (the worker's end, a panic included) never frees buffers the kernel may
/// still write: see `Drop`.
struct Queue<'a> {
    qid: usize,
    /// Declared before the entries: dropped before them (its close cancels every command
    /// still pending), though `Drop` leaks them anyway while one may be pending.
    ring: IoUring<squeue::Entry128, cqueue::Entry>,
    entries: Vec<Entry>,
    fd: types::Fd,
    abort: &'a AbortConn,
    faults: Faults,
    /// Why this worker aborted the connection, once it has.
    fatal: Option<String>,
}

impl Drop for Queue<'_> {
    fn drop(&mut self) {
        let panicking = std::thread::panicking();
        if panicking {
            // Its entries will not be served again: abort, or the requests queued on
            // this CPU wait for good.
            self.fail(format!("queue {}: the ring worker panicked", self.qid));
        }
        if panicking || self.entries.iter().any(|e| e.in_kernel) {
            // A command may still be in the kernel, which may write its buffers until it
            // completes: never free them (the connection's end releases the entries).
            std::mem::forget(std::mem::take(&mut self.entries));
        }
    }
}

impl Queue<'_> {
    /// The `qid` this worker's commands name.
    fn qid(&self) -> u16 {
        self.qid as u16
    }

    /// Aborts the connection for `why` (once per worker).
    fn fail(&mut self, why: String) {
        if self.fatal.is_some() {
            return;
        }
        let why = match (self.abort)(&why) {
            Ok(()) => why,
            Err(e) => format!("{why} (aborting the connection failed: {e})"),
        };
        self.fatal = Some(why);
    }

    /// Pushes entry `i`'s REGISTER (submitted by the next submit).
    fn push_register(&mut self, i: usize) -> Result<(), String> {
        let qid = if self.faults.refuse == Some(self.qid) {
            BAD_QID
        } else {
            self.qid()
        };
        let e = &mut self.entries[i];
        let sqe = opcode::UringCmd80::new(self.fd, abi::uring::FUSE_IO_URING_CMD_REGISTER)
            .addr(Some(e.iov.as_ptr() as u64))
            .cmd(cmd_req(qid, 0))
            .build()
            .user_data(i as u64);
        let sqe = abi::sqe::sqe128_with_len(sqe, 2);
        e.last = Cmd::Register;
        self.push(i, &sqe)
    }

    /// Pushes entry `i`'s COMMIT_AND_FETCH of request `commit_id`.
    fn push_commit(&mut self, i: usize, commit_id: u64) -> Result<(), String> {
        let qid = if self.faults.bad_commits > 0 {
            self.faults.bad_commits -= 1;
            BAD_QID
        } else {
            self.qid()
        };
        let sqe = opcode::UringCmd80::new(self.fd, abi::uring::FUSE_IO_URING_CMD_COMMIT_AND_FETCH)
            .cmd(cmd_req(qid, commit_id))
            .build()
            .user_data(i as u64);
        self.entries[i].last = Cmd::Commit(commit_id);
        self.push(i, &sqe)
    }

    /// Pushes `sqe` of entry `i`, submitting first if the submission queue is full
    /// (never, with one command per entry and a queue twice that size).
    fn push(&mut self, i: usize, sqe: &squeue::Entry128) -> Result<(), String> {
        for attempt in 0..2 {
            // SAFETY: the SQE names entry `i`'s iovec pair (a REGISTER) or nothing (a
            // commit: the kernel uses the buffers registered with the entry); the pair
            // and the buffers are boxed, never move, and outlive the command: they are
            // freed only when no command of this worker may be in the kernel, else leaked
            // (`Drop`, module invariants). `Iovec` is `struct iovec`'s layout.
            if unsafe { self.ring.submission().push(sqe) }.is_ok() {
                self.entries[i].in_kernel = true;
                return Ok(());
            }
            if attempt == 0 {
                let _ = self.ring.submit();
            }
        }
        Err(format!(
            "queue {}: entry {i}: the submission queue is full",
            self.qid
        ))
    }

    /// Sends entry `i`'s last command again.
    fn resend(&mut self, i: usize) -> Result<(), String> {
        match self.entries[i].last {
            Cmd::Register => self.push_register(i),
            Cmd::Commit(id) => self.push_commit(i, id),
        }
    }
}

/// Queue `qid`'s worker: pins itself to `cpus`, makes its ring, registers [`RING_DEPTH`]
/// entries (telling `up` whether that worked), then serves until none of its entries has
/// a command in the kernel.
fn queue_worker(
    fs: &UvfsFuse,
    dev: &OwnedFd,
    qid: usize,
    cpus: &[usize],
    up: &mpsc::Sender<Result<(), String>>,
    abort: &AbortConn,
    faults: Faults,
) -> WorkerEnd {
    let mut set = rustix::thread::CpuSet::new();
    for &c in cpus
        .iter()
        .filter(|&&c| c < rustix::thread::CpuSet::MAX_CPU)
    {
        set.set(c);
    }
    if set.count() > 0 {
        // Best effort: a possible but offline CPU cannot be pinned to.
        let _ = rustix::thread::sched_setaffinity(None, &set);
    }
    let ring = IoUring::<squeue::Entry128, cqueue::Entry>::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(RING_DEPTH as u32 * 2);
    let ring = match ring {
        Ok(r) => r,
        Err(e) => {
            let _ = up.send(Err(format!("queue {qid}: io_uring_setup: {e}")));
            return WorkerEnd::default();
        }
    };
    let payload = super::dispatch::max_payload();
    let mut q = Queue {
        qid,
        ring,
        entries: (0..RING_DEPTH).map(|_| Entry::new(payload)).collect(),
        fd: types::Fd(dev.as_fd().as_raw_fd()),
        abort,
        faults,
        fatal: None,
    };
    if faults.refuse == Some(qid) {
        std::thread::sleep(Duration::from_secs(1));
    }
    // Before the first read: a request the kernel puts in an entry is sent (`FR_SENT`, so
    // its interrupt may come) before this worker serves the ones ahead of it in the batch
    // (module doc, "Interrupts").
    let intr = fs.register_intr_batched();
    for i in 0..RING_DEPTH {
        if let Err(e) = q.push_register(i) {
            let _ = up.send(Err(e));
            return WorkerEnd::default();
        }
    }
    intr.next_batch();
    if let Err(e) = q.ring.submit() {
        // Nothing reached the kernel, or some did: `Drop` leaks the buffers either way.
        let _ = up.send(Err(format!("queue {qid}: REGISTER: {e}")));
        return WorkerEnd::default();
    }
    // A refused REGISTER completes at once (`fuse_uring_cmd` returns the error instead of
    // `-EIOCBQUEUED`), so the first pass over the completion queue, before any wait, tells
    // `up`; an accepted one completes only when a request arrives.
    let mut served = 0u64;
    let mut refused = None;
    let mut reported = false;
    let mut wait_errors = 0;
    loop {
        let done: Vec<cqueue::Entry> = q.ring.completion().collect();
        for c in done {
            let i = c.user_data() as usize;
            let Some(e) = q.entries.get_mut(i) else {
                q.fail(format!("queue {qid}: a completion names no entry ({i})"));
                continue;
            };
            // The command completed: the kernel no longer touches the buffers until the
            // entry's next command (module invariants).
            e.in_kernel = false;
            let res = c.result();
            if res >= 0 {
                e.failures = 0;
                let next = serve_one(fs, &mut q.entries[i]).and_then(|id| q.push_commit(i, id));
                match next {
                    Ok(()) => served += 1,
                    Err(why) => q.fail(format!("queue {qid}: entry {i}: {why}")),
                }
                continue;
            }
            if !reported {
                // A REGISTER refused: the rings are refused, not retried. A teardown
                // errno is not a refusal: the mount went while the rings came up (a
                // SIGTERM at start-up: CI saw `ENOTCONN` here end a clean stop with exit
                // 1); the entry retires and the session ends as any teardown.
                if !is_teardown(-res) {
                    refused.get_or_insert(res);
                }
                continue;
            }
            let last = e.last;
            match on_error(-res, &mut e.failures) {
                OnError::Retire => {}
                OnError::Retry(pause) => {
                    std::thread::sleep(pause);
                    if let Err(why) = q.resend(i) {
                        q.fail(why);
                    }
                }
                OnError::Abort => q.fail(format!(
                    "queue {qid}: entry {i}: {last:?} failed {} times in a row, last with {}",
                    MAX_RETRIES + 1,
                    io::Error::from_raw_os_error(-res)
                )),
            }
        }
        if !reported {
            reported = true;
            let _ = up.send(match refused {
                None => Ok(()),
                Some(e) => Err(format!(
                    "queue {qid}: REGISTER refused: {}",
                    io::Error::from_raw_os_error(-e)
                )),
            });
        }
        if !q.entries.iter().any(|e| e.in_kernel) {
            break;
        }
        // Every request reaped above was served: the next batch begins.
        intr.next_batch();
        match q.ring.submit_and_wait(1) {
            Ok(_) => wait_errors = 0,
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::INTR.raw_os_error()) => {}
            // (`EBUSY` with the completion queue full cannot last: it is drained above.)
            Err(e) => {
                wait_errors += 1;
                if wait_errors > 100 {
                    // Entries still in the kernel: `Drop` leaks their buffers.
                    q.fail(format!("queue {qid}: io_uring_enter: {e}"));
                    break;
                }
            }
        }
    }
    WorkerEnd {
        served,
        fatal: q.fatal.take(),
    }
}

/// Serves the request in entry `e` (whose completion was just reaped) and returns the id
/// to commit it with.
fn serve_one(fs: &UvfsFuse, e: &mut Entry) -> Result<u64, String> {
    thread_local! {
        static SCRATCH: std::cell::RefCell<UringScratch> = Default::default();
    }
    SCRATCH.with(|s| {
        commit_id(fs.serve_uring_entry(&mut e.header, &mut e.payload, &mut s.borrow_mut()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::io::Errno;

    /// Bug (issue 13 (f)): the queue count was the highest possible CPU id + 1, where the
    /// kernel makes `num_possible_cpus()` queues; with a sparse mask the last REGISTERs
    /// named a queue id past them and were refused. Fix: one queue per possible CPU,
    /// ids `0..count`, queue 0 also taking the CPUs past the last queue.
    #[test]
    fn cpu_lists_and_queues() {
        assert_eq!(parse_cpu_list("0-1\n"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("0,2-3,8"), Some(vec![0, 2, 3, 8]));
        for bad in ["", "a", "3-1", "0-", "0-99999999", "1,,2"] {
            assert_eq!(parse_cpu_list(bad), None, "{bad:?}");
        }
        let sparse = [0, 2, 3, 8];
        assert_eq!(queue_cpus(&sparse, 0), [0, 8]);
        assert_eq!(queue_cpus(&sparse, 1), [] as [usize; 0]);
        assert_eq!(queue_cpus(&sparse, 2), [2]);
        assert_eq!(queue_cpus(&sparse, 3), [3]);
        assert_eq!(queue_cpus(&[0, 1], 1), [1]);
    }

    /// Bug (issue 13 (b)): every negative completion retired its entry, so a few
    /// transient errors on one CPU stalled that CPU's requests for good. Fix: only the
    /// teardown errors retire quietly; others retry, [`MAX_RETRIES`] times in a row, then
    /// abort; a success in between starts the count again (the worker resets it).
    #[test]
    fn errors_retry_then_abort_and_teardown_retires() {
        for e in [Errno::NOTCONN, Errno::CONNABORTED, Errno::NODEV] {
            let mut f = 0;
            assert_eq!(on_error(e.raw_os_error(), &mut f), OnError::Retire);
            assert_eq!(f, 0);
        }
        for e in [
            Errno::INVAL,
            Errno::NOENT,
            Errno::NOMEM,
            Errno::AGAIN,
            Errno::CANCELED,
        ] {
            let mut f = 0;
            let mut pauses = Vec::new();
            loop {
                match on_error(e.raw_os_error(), &mut f) {
                    OnError::Retry(p) => pauses.push(p.as_millis()),
                    OnError::Abort => break,
                    OnError::Retire => panic!("{e:?} retired"),
                }
            }
            assert_eq!(pauses, [4, 16, 64, 256], "{e:?}");
            assert_eq!(f, MAX_RETRIES + 1);
        }
    }

    /// Bug (issue 13 (d)): a missing commit id committed entry 0 (`unwrap_or(0)`): the
    /// kernel finds no such request, the real one is never answered. Fix: a protocol
    /// error, which aborts the connection.
    #[test]
    fn missing_or_zero_commit_id_is_a_protocol_error() {
        assert_eq!(commit_id(Ok(7)), Ok(7));
        assert!(commit_id(Ok(0)).is_err());
        assert!(commit_id(Err(crate::errno::Errno::EINVAL)).is_err());
    }

    #[test]
    fn faults_parse() {
        assert_eq!(Faults::parse(""), Some(Faults::default()));
        assert_eq!(
            Faults::parse("refuse=last,bad-commits=3"),
            Some(Faults {
                refuse: Some(usize::MAX),
                bad_commits: 3
            })
        );
        assert_eq!(Faults::parse("refuse=1").unwrap().refuse, Some(1));
        assert_eq!(Faults::parse("nope=1"), None);
    }

    thread_local! {
        /// Entries dropped (freed) on this thread: the probe of the leak test.
        static ENTRY_DROPS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    impl Drop for Entry {
        fn drop(&mut self) {
            ENTRY_DROPS.with(|c| c.set(c.get() + 1));
        }
    }

    /// Makes a queue of `n` entries (no command pushed) on a fresh ring; `None` where
    /// io_uring is unavailable.
    fn queue<'a>(abort: &'a AbortConn, n: usize) -> Option<Queue<'a>> {
        let ring = IoUring::<squeue::Entry128, cqueue::Entry>::builder()
            .build(8)
            .ok()?;
        Some(Queue {
            qid: 0,
            ring,
            entries: (0..n).map(|_| Entry::new(64)).collect(),
            fd: types::Fd(-1),
            abort,
            faults: Faults::default(),
            fatal: None,
        })
    }

    /// Bug (issue 13 (c)): a panic in a worker unwound through its ring and entries and
    /// freed the registered buffers while the kernel could still write them. Fix:
    /// `Queue`'s drop leaks them after a panic (and whenever a command may still be in
    /// the kernel) and aborts the connection, whose requests would otherwise wait on
    /// entries nobody serves; a queue with nothing in the kernel frees them.
    #[test]
    fn a_panicking_queue_leaks_its_buffers_and_aborts() {
        let (tx, rx) = mpsc::channel::<String>();
        let abort: AbortConn = Arc::new(move |why: &str| {
            let _ = tx.send(why.to_owned());
            Ok(())
        });
        let drops = std::thread::scope(|s| {
            s.spawn(|| {
                let q = queue(&abort, 2)?;
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                    let _q = q;
                    panic!("injected")
                }));
                assert!(r.is_err());
                let leaked = ENTRY_DROPS.with(|c| c.get());
                // Nothing in the kernel, no panic: freed.
                drop(queue(&abort, 2));
                // A command outstanding: leaked.
                let mut q = queue(&abort, 2)?;
                q.entries[1].in_kernel = true;
                drop(q);
                Some((leaked, ENTRY_DROPS.with(|c| c.get())))
            })
            .join()
            .unwrap()
        });
        let Some((after_panic, after_all)) = drops else {
            println!("skipped: no io_uring here");
            return;
        };
        assert_eq!(after_panic, 0, "a panicking queue freed its entries");
        assert_eq!(after_all, 2, "only the idle queue's two entries are freed");
        let whys: Vec<String> = rx.try_iter().collect();
        assert_eq!(whys, ["queue 0: the ring worker panicked"]);
    }
}
