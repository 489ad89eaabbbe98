//! A connection to a FUSE server: over a `SOCK_SEQPACKET` socket pair (transport 1 of
//! issue 11: the server runs as a child process whose mountpoint argument is `/dev/fd/N`;
//! libfuse >= 3.3 serves an inherited descriptor given that way, without mounting
//! anything; each message is one packet) or a connected Unix stream socket (transport 2:
//! servers built on `fuse_session_custom_io`, as libfuse's `hello_ll_uds`; each message
//! framed by its header's length). The INIT handshake negotiates the protocol; replies are
//! matched to requests by `unique`, received by the waiting callers themselves
//! (leader.rs: leader/follower) or, on an idle connection, by a reader thread.
//!
//! Linux analogue: fs/fuse/dev.c (`fuse_dev_do_write`, `request_find`, `fuse_abort_conn`),
//! fs/fuse/inode.c (`fuse_send_init`, `process_init_reply`).
//!
//! # Requests
//! A caller writes its request itself (one `send`: the socket keeps packets whole and in
//! order, so there is no pending queue for a server to read), after putting it on the
//! processing table, sharded by `unique` so that concurrent callers lock different
//! shards; then it waits ([`Leadership::wait`]): as the leader it receives messages until
//! its own reply came, as a follower it sleeps on the request until it is finished or made
//! the leader. Whoever receives a reply takes its request out of the shard by the reply's
//! `unique` and completes it ([`Request::complete`], which is `request_end`), waking its
//! waiter. Uniques come from per-thread batches, so no line is written by every request
//! of every thread.
//!
//! # Background requests and forgets
//! A request nobody waits for ([`Conn::request_background`]: RELEASE, RELEASEDIR) is
//! sent only while fewer than `max_background` are in flight; the rest wait in the
//! background queue, in order (a request may pass one a receiver is putting back after a
//! full socket), and each reply to a background request sends the next
//! (Linux `fc->bg_queue`, `flush_bg_queue`). Whoever receives sends without blocking (a
//! receiver blocked on a full socket while the server blocks on its replies to us would
//! deadlock both); what it cannot send now, the next caller's request sends first.
//!
//! FORGETs ([`Conn::forget`], one per evicted inode) are queued and sent as one
//! BATCH_FORGET (7.16; INIT refuses servers before 7.23) when [`FORGET_BATCH`] are
//! queued, before the next request is sent, and before DESTROY (Linux queues them on
//! `fiq->forget_list_head` and the server's read takes a batch). The batch an eviction
//! completes is sent without blocking (an eviction may run on a receiver: a notification's
//! invalidation can drop an inode's last reference); when the socket is full it stays
//! queued, and so does every later eviction, until the next request sends the queue. On a
//! stream socket (where a partial send would have to be finished by blocking) evictions
//! only queue. So while the socket has room the server learns of at most
//! `FORGET_BATCH - 1` evictions late; otherwise of all since it filled (stream: since the
//! last request), at the next request or unmount. FORGETs of one node may pass each other
//! (a caller's send of the queue and an eviction's batch): their counts only add up.
//!
//! # Failures
//! A malformed message ([`ProtoError`]) is counted and, when its `unique` names a request
//! in flight, fails that request with `EIO`; a reply to no request in flight is counted
//! and dropped. When the server closes its end (it exited or crashed) or the socket
//! fails, the connection aborts: every request in flight fails with `ECONNABORTED`, and
//! every later one with `ENOTCONN` (Linux `fuse_abort_conn`, `fuse_request_send` on a
//! dead connection). A request is never left waiting for a server that is gone.

use super::leader::{Leadership, Received, Waited, Wire};
use super::request::{EndMode, InputQueue, Request, FR_BACKGROUND, FR_FINISHED};
use crate::fuse::abi::{self, init, opcode, InHeader, InitIn, InitOut, Message};
use crate::sync::padded::CacheLine;
use crate::sync::plain::{AtomicBool, AtomicU64, AtomicUsize, Mutex, Ordering};
use crate::sync::plock;
use crate::{Errno, Result};
use rustix::fd::{AsFd, AsRawFd, OwnedFd};
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};
use std::collections::{HashMap, VecDeque};
use std::ptr::NonNull;
use std::sync::Arc;
use zerocopy::IntoBytes;

/// The reader thread's name.
const READER_NAME: &str = "uvfs-fuse-reader";

/// Processing-table shards (a power of two).
const SHARDS: usize = 16;

/// Uniques a thread takes at once (each request uses two: its own, even, and its
/// interrupt's, odd).
const UNIQUE_BATCH: u64 = 2048;

/// The socket buffer asked for on both ends (bytes); a reply larger than the sender's
/// buffer would be lost (`EMSGSIZE`), so reads and writes are capped to what fits.
const SOCK_BUF: usize = 4 << 20;

/// The largest read or write uvfs asks for in one request (FUSE's default `max_pages`
/// of 32 pages).
const MAX_IO: usize = 128 << 10;

/// FORGETs queued before they are sent as one BATCH_FORGET.
pub(crate) const FORGET_BATCH: usize = 16;

/// The most FORGETs one BATCH_FORGET carries (4 KiB of `fuse_forget_one`s, far below any
/// server's read buffer); a longer queue goes as several.
pub(crate) const FORGET_MAX: usize = 256;

/// FORGETs not sent yet, under one lock.
#[derive(Default)]
struct Forgets {
    /// In eviction order.
    ones: Vec<abi::ForgetOne>,
    /// A send from [`Conn::forget`] found the socket full: until a caller's request sends
    /// the queue (`flush_queues`), evictions only queue (one push each, not a retry of the
    /// whole queue).
    stalled: bool,
}

/// How long INIT waits for the server's answer (10 s in the unit tests: 2 s until
/// 2026-12-07, when the hostile-server tests' `python3` took longer than that to start at a
/// load of 20 on this 2-core VM).
const INIT_TIMEOUT: std::time::Duration =
    std::time::Duration::from_secs(if cfg!(test) { 10 } else { 30 });

/// The minor this client offers in INIT.
const OFFER_MINOR: u32 = abi::FUSE_KERNEL_MINOR_VERSION;

/// The capabilities uvfs offers in INIT: only what it implements (no splice,
/// passthrough, DAX, writeback cache, locks). `FUSE_AUTO_INVAL_DATA` as Linux offers it:
/// a server that accepts it has reads check the attributes' timeout and a changed mtime
/// drop the file's cached pages (fs.rs). `FUSE_DO_READDIRPLUS` with
/// `FUSE_READDIRPLUS_AUTO`, as Linux: listings that give the entries' attributes (fs.rs).
/// `FUSE_ATOMIC_O_TRUNC` as Linux offers it: a server that accepts it (libfuse does by
/// default) gets `O_TRUNC` in OPEN, and no SETATTR follows (fs.rs `open`).
const OFFER_FLAGS: u64 = init::FUSE_ASYNC_READ
    | init::FUSE_ATOMIC_O_TRUNC
    | init::FUSE_AUTO_INVAL_DATA
    | init::FUSE_BIG_WRITES
    | init::FUSE_DO_READDIRPLUS
    | init::FUSE_DONT_MASK
    | init::FUSE_MAX_PAGES
    | init::FUSE_PARALLEL_DIROPS
    | init::FUSE_READDIRPLUS_AUTO
    | init::FUSE_INIT_EXT;

/// How messages are delimited on the socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framing {
    /// `SOCK_SEQPACKET`: one message per packet.
    Packet,
    /// `SOCK_STREAM`: each message's header carries its length (`len`).
    Stream,
}

/// What INIT settled (`process_init_reply`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Negotiated {
    /// The protocol minor both sides speak: the smaller of the two.
    pub(crate) minor: u32,
    /// The capabilities both sides have (offered and accepted).
    pub(crate) flags: u64,
    /// The largest WRITE payload (bytes): the server's `max_write`, capped by what the
    /// socket carries in one packet.
    pub(crate) max_write: usize,
    /// The largest READ uvfs asks for (bytes), by the same cap.
    pub(crate) max_read: usize,
    /// Background requests in flight at most (`max_background`; 0 from the server means
    /// Linux's default of 12).
    pub(crate) max_background: u16,
    /// Background requests above which the connection counts as congested.
    pub(crate) congestion_threshold: u16,
}

/// Counters of what went wrong on a connection (diagnostics; Relaxed snapshots).
#[derive(Debug, Default)]
pub(crate) struct ConnStats {
    /// Malformed messages from the server.
    pub(crate) proto_errors: AtomicU64,
    /// Replies to no request in flight.
    pub(crate) unknown_uniques: AtomicU64,
    /// Requests not answered within the request timeout (each aborted the connection).
    pub(crate) timeouts: AtomicU64,
    /// Tests: replies acted on by the reader thread (the rest by callers, leader.rs).
    #[cfg(test)]
    pub(crate) by_reader: AtomicU64,
}

/// One shard of the processing table: requests sent and not yet answered, by unique.
/// The table holds the in-flight reference of each.
struct Shard(Mutex<HashMap<u64, NonNull<Request>>>);

// SAFETY: the pointers are requests whose in-flight reference the table owns; they are
// dereferenced by whichever thread removes them (under the shard lock), and `Request` is
// `Send + Sync`.
unsafe impl Send for Shard {}
// SAFETY: as above.
unsafe impl Sync for Shard {}

/// What [`Conn::send_request`] did.
enum Sent {
    /// Sent (or, blocking, failed and completed with the errno).
    Done,
    /// Not blocking: the send failed; the request was completed with the errno and freed.
    Failed,
    /// Not sent: the socket is full (only without blocking).
    Full,
}

/// Background requests (`fc->num_background`, `fc->bg_queue`), under one lock.
#[derive(Default)]
struct Background {
    /// In flight (sent, not answered).
    active: usize,
    /// Waiting to be sent, oldest first: unique, message, the request (its table
    /// reference, owned here until it is put in the table).
    queue: VecDeque<(u64, Vec<u8>, NonNull<Request>)>,
}

// SAFETY: the pointers are requests this queue owns a reference of (see the field); they
// are used only under the lock, and `Request` is `Send + Sync`.
unsafe impl Send for Background {}

/// A FUSE connection.
pub(crate) struct Conn {
    /// The client's end of the socket.
    sock: OwnedFd,
    /// How messages are delimited on it.
    framing: Framing,
    /// Serialises senders on a stream socket (a large message may be written in pieces,
    /// which must not interleave); unused for packets (each `send` is one packet).
    send_lock: Mutex<()>,
    /// What INIT settled.
    proto: Negotiated,
    /// The processing table (`fpq->processing`, hashed by unique as Linux's).
    processing: [Shard; SHARDS],
    /// The input queue's interrupt list.
    iq: InputQueue,
    /// How replies end their requests (`request_end`): [`EndMode::Sticky`] but for the
    /// ablation's "before". Set once, before the first request, by the mount.
    end_mode: std::sync::OnceLock<EndMode>,
    /// How long a caller waits for an answer before the connection aborts (none: for
    /// ever). Set once, before the first request, by the mount.
    timeout: std::sync::OnceLock<std::time::Duration>,
    /// How long a receiving caller looks for its reply before it sleeps (fs.rs
    /// `FuseClientOptions::receive_spin`; unset: none). Set once, by the mount.
    spin: std::sync::OnceLock<std::time::Duration>,
    /// Callers waiting for their reply now (a hint, on its own line: written twice by each
    /// request that is waited for). The receiving caller (the leader, leader.rs: at most
    /// one at a time) spins only while at most [`Conn::spin_waiters`] callers wait.
    waiting: CacheLine<AtomicUsize>,
    /// The most callers that may wait while the leader spins: half the CPUs (none on one
    /// CPU), so the server's threads keep CPUs to answer on. Measured on this project's AMD
    /// VM (2 vCPUs, `uvfs bench --target fuse-client`): with a 120-250 us spin whatever
    /// the number of waiters, the 2-thread rows fell (syscall 0.53-0.58x -> 0.45-0.48x,
    /// futimes 0.72-0.78x -> 0.50-0.69x the kernel's client against spins of 0-30 us).
    spin_waiters: usize,
    /// False once the connection aborted (`fc->connected`); requests then fail.
    connected: AtomicBool,
    /// Why it aborted, set by the first abort (see [`Conn::ended`]).
    why_ended: std::sync::OnceLock<Ended>,
    /// Unique-batch source: the next batch's first unique; written once per batch.
    next_batch: AtomicU64,
    /// Background requests; taken for each RELEASE and each reply to one (per connection,
    /// as Linux's `fc->bg_lock`), on its own line.
    bg: CacheLine<Mutex<Background>>,
    /// Some queued background request could not be sent by a receiver (a full socket):
    /// the next request sends it. A hint, set and cleared under `bg`.
    bg_stalled: AtomicBool,
    /// FORGETs not sent yet (at most `FORGET_BATCH - 1` while the socket has room; see the
    /// module doc), on their own line.
    forgets: CacheLine<Mutex<Forgets>>,
    /// `forgets` is not empty: a hint read by every request, set and cleared under its
    /// lock.
    forgets_queued: AtomicBool,
    /// The server answered an interrupt with `ENOSYS` (`fc->no_interrupt`).
    no_interrupt: AtomicBool,
    /// An interrupt is linked that a receiver could not send: the next caller sends it.
    /// A hint.
    intr_stalled: AtomicBool,
    /// This connection's id, for the per-thread batches.
    id: u64,
    /// Counters.
    pub(crate) stats: ConnStats,
    /// The server process, reaped at drop.
    pub(super) child: Mutex<Option<std::process::Child>>,
    /// Who receives (leader.rs); shared with the reader thread, which holds no
    /// reference to the connection while it waits.
    lead: Arc<Leadership>,
    /// An eventfd that ends the reader thread's idle look at the socket (leader.rs: a
    /// leader handed it a notification).
    wake: OwnedFd,
    /// The reader thread (it receives while no caller does, leader.rs), joined at drop.
    reader: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// What applies the server's notifications (INVAL_INODE, INVAL_ENTRY, DELETE): the
    /// file system over this connection, set once at its mount; run on the reader thread
    /// only (a receiving caller hands notifications to it, leader.rs).
    notify: std::sync::OnceLock<NotifyFn>,
}

/// Why a connection aborted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    /// The server closed its end or sent what cannot be read (EOF, a malformed packet).
    Closed,
    /// A request waited past the request timeout.
    Timeout,
    /// The mount went (the connection's drop).
    Unmounted,
}

/// A notification handler: `(code, payload)`.
pub(crate) type NotifyFn = Box<dyn Fn(i32, &[u8]) + Send + Sync>;

/// Connection ids (for the per-thread unique batches; never reused).
static NEXT_CONN_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// (connection id, next unique, end of batch) of this thread's batch.
    static UNIQUES: std::cell::Cell<(u64, u64, u64)> = const { std::cell::Cell::new((0, 0, 0)) };
}

impl Conn {
    /// Starts the FUSE server `argv` (its program and arguments; the argument `{}` is
    /// replaced by `/dev/fd/N`, its end of the socket pair) and runs INIT with it.
    ///
    /// # Errors
    /// `EINVAL` for an empty `argv` or none with `{}`; the errno of `socketpair` or of
    /// starting the program (`ENOENT` when it does not exist); `EPROTO` when the server
    /// answers INIT with another major, a minor below 7.23 or a malformed reply;
    /// `ECONNABORTED` when it exits first; `ETIMEDOUT` when it has not answered within
    /// 30 s.
    #[cfg(test)]
    pub(crate) fn spawn(argv: &[String]) -> Result<Arc<Conn>> {
        Conn::spawn_with(argv, None)
    }

    /// [`spawn`](Self::spawn), giving up on INIT when `cancel` says so ([`Cancel`]).
    ///
    /// # Errors
    /// As [`spawn`](Self::spawn); `ECANCELED` when `cancel` gave up (the server killed).
    pub(crate) fn spawn_with(argv: &[String], cancel: Cancel) -> Result<Arc<Conn>> {
        if argv.is_empty() || !argv.iter().any(|a| a == "{}") {
            return Err(Errno::EINVAL);
        }
        let (mine, theirs) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )
        .map_err(Errno::from)?;
        for fd in [&mine, &theirs] {
            size_buffers(fd);
        }
        let n = theirs.as_raw_fd();
        let args: Vec<String> = argv[1..]
            .iter()
            .map(|a| {
                if a == "{}" {
                    format!("/dev/fd/{n}")
                } else {
                    a.clone()
                }
            })
            .collect();
        let mut cmd = std::process::Command::new(&argv[0]);
        cmd.args(&args);
        // SAFETY: between fork and exec only async-signal-safe calls (fcntl).
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(move || {
                // The server's end survives exec (it was opened close-on-exec).
                if libc_fcntl_clear_cloexec(n) {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
        let child = cmd.spawn().map_err(|e| Errno::from_io_error(&e))?;
        // Our copy of the server's end goes, so that its exit is our EOF.
        drop(theirs);
        Conn::start(mine, Framing::Packet, Some(child), cancel)
    }

    /// Connects to a FUSE server listening on the Unix stream socket `path` (transport 2:
    /// libfuse's `hello_ll_uds` example and servers built on `fuse_session_custom_io`):
    /// messages framed by their header's `len`, then INIT.
    ///
    /// # Errors
    /// `connect`'s errno (`ENOENT`, `ECONNREFUSED`, ...); INIT's as [`spawn`](Self::spawn).
    #[cfg(test)]
    pub(crate) fn connect(path: &std::path::Path) -> Result<Arc<Conn>> {
        Conn::connect_with(path, None)
    }

    /// [`connect`](Self::connect), giving up on INIT when `cancel` says so.
    ///
    /// # Errors
    /// As [`connect`](Self::connect); `ECANCELED`.
    pub(crate) fn connect_with(path: &std::path::Path, cancel: Cancel) -> Result<Arc<Conn>> {
        let s =
            std::os::unix::net::UnixStream::connect(path).map_err(|e| Errno::from_io_error(&e))?;
        let fd = OwnedFd::from(s);
        size_buffers(&fd);
        Conn::start(fd, Framing::Stream, None, cancel)
    }

    /// Uses `sock`, a connected Unix socket whose peer serves FUSE (transport 3: a server
    /// in this process on the other end of a socket pair): packets for `SOCK_SEQPACKET`,
    /// header-length framing for `SOCK_STREAM`; then INIT.
    ///
    /// # Errors
    /// `ENOTSOCK` for a descriptor that is not a socket, `EINVAL` for a socket of another
    /// type (datagrams lose the order and may drop messages); INIT's as
    /// [`spawn`](Self::spawn).
    #[cfg(test)]
    pub(crate) fn socket(sock: OwnedFd) -> Result<Arc<Conn>> {
        Conn::socket_with(sock, None)
    }

    /// [`socket`](Self::socket), giving up on INIT when `cancel` says so.
    ///
    /// # Errors
    /// As [`socket`](Self::socket); `ECANCELED`.
    pub(crate) fn socket_with(sock: OwnedFd, cancel: Cancel) -> Result<Arc<Conn>> {
        let framing = match rustix::net::sockopt::socket_type(&sock).map_err(Errno::from)? {
            SocketType::SEQPACKET => Framing::Packet,
            SocketType::STREAM => Framing::Stream,
            _ => return Err(Errno::EINVAL),
        };
        // The receivers and the handshake block: a non-blocking socket (one from an async
        // runtime) would fail them with EAGAIN.
        let fl = rustix::fs::fcntl_getfl(&sock).map_err(Errno::from)?;
        if fl.contains(rustix::fs::OFlags::NONBLOCK) {
            rustix::fs::fcntl_setfl(&sock, fl - rustix::fs::OFlags::NONBLOCK)
                .map_err(Errno::from)?;
        }
        size_buffers(&sock);
        Conn::start(sock, framing, None, cancel)
    }

    /// INIT on `sock`, then the connection and its reader thread. On an INIT error the
    /// server process, if any, is killed and reaped.
    fn start(
        sock: OwnedFd,
        framing: Framing,
        child: Option<std::process::Child>,
        cancel: Cancel,
    ) -> Result<Arc<Conn>> {
        let cap = match framing {
            Framing::Packet => io_cap(&sock),
            // A stream carries a message of any size in pieces.
            Framing::Stream => MAX_IO,
        };
        let proto = match handshake(&sock, framing, cap, cancel) {
            Ok(p) => p,
            Err(e) => {
                if let Some(mut c) = child {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                return Err(e);
            }
        };
        let wake = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )
        .map_err(Errno::from)?;
        let conn = Arc::new(Conn {
            sock,
            framing,
            send_lock: Mutex::new(()),
            proto,
            processing: std::array::from_fn(|_| Shard(Mutex::new(HashMap::new()))),
            iq: InputQueue::default(),
            end_mode: std::sync::OnceLock::new(),
            timeout: std::sync::OnceLock::new(),
            spin: std::sync::OnceLock::new(),
            waiting: CacheLine(AtomicUsize::new(0)),
            spin_waiters: std::thread::available_parallelism().map_or(0, |n| n.get() / 2),
            connected: AtomicBool::new(true),
            why_ended: std::sync::OnceLock::new(),
            // INIT used unique 2.
            next_batch: AtomicU64::new(4),
            bg: CacheLine(Mutex::new(Background::default())),
            bg_stalled: AtomicBool::new(false),
            forgets: CacheLine(Mutex::new(Forgets::default())),
            forgets_queued: AtomicBool::new(false),
            no_interrupt: AtomicBool::new(false),
            intr_stalled: AtomicBool::new(false),
            // Relaxed: a unique id, ordered with nothing.
            id: NEXT_CONN_ID.fetch_add(1, Ordering::Relaxed),
            stats: ConnStats::default(),
            child: Mutex::new(child),
            lead: Arc::new(Leadership::new(MAX_IO + 64 * 1024)),
            wake,
            reader: Mutex::new(None),
            notify: std::sync::OnceLock::new(),
        });
        let weak = Arc::downgrade(&conn);
        let fd = conn
            .sock
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| Errno::from_io_error(&e))?;
        let lead = conn.lead.clone();
        let reader_wake = conn
            .wake
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| Errno::from_io_error(&e))?;
        let h = std::thread::Builder::new()
            .name(READER_NAME.into())
            .spawn(move || {
                lead.reader(&ReaderWire {
                    fd,
                    wake: reader_wake,
                    framing,
                    conn: weak,
                })
            })
            .map_err(|_| Errno::EAGAIN)?;
        *plock(&conn.reader) = Some(h);
        conn.start_reaper();
        Ok(conn)
    }

    /// For a server process uvfs started: a thread that waits (on a pidfd, blocked in
    /// `poll`) for that process to exit and reaps it at once, so that a server that puts
    /// itself in the background (libfuse without `-f`: the process started forks and
    /// exits) leaves no defunct process behind for as long as the mount lives. It holds
    /// the connection weakly: once the connection is gone, its drop has reaped (or killed
    /// and reaped) the process and the thread only ends. Nothing without pidfds (Linux
    /// before 5.3): the process is then reaped at the connection's drop, as before.
    fn start_reaper(self: &Arc<Self>) {
        let Some(pid) = plock(&self.child).as_ref().map(|c| c.id()) else {
            return;
        };
        let Some(pidfd) = rustix::process::Pid::from_raw(pid as i32).and_then(|p| {
            rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok()
        }) else {
            return;
        };
        let weak = Arc::downgrade(self);
        let _ = std::thread::Builder::new()
            .name("uvfs-fuse-reap".into())
            .spawn(move || {
                let mut fds = [rustix::event::PollFd::new(
                    &pidfd,
                    rustix::event::PollFlags::IN,
                )];
                // Readable once the process has exited.
                loop {
                    match rustix::event::poll(&mut fds, None) {
                        Ok(n) if n > 0 => break,
                        Ok(_) | Err(rustix::io::Errno::INTR) => {}
                        // Cannot wait: the connection's drop reaps it.
                        Err(_) => return,
                    }
                }
                if let Some(conn) = weak.upgrade() {
                    if let Some(c) = plock(&conn.child).as_mut() {
                        // Reaps it; the status stays in `c` (`Conn::ended` reads it).
                        let _ = c.try_wait();
                    }
                }
            });
    }

    /// Sets what applies the server's notifications (once; later calls are ignored).
    pub(crate) fn set_notify(&self, f: NotifyFn) {
        let _ = self.notify.set(f);
    }

    /// Sets how replies end their requests (once, before the first request after INIT;
    /// later calls are ignored).
    pub(crate) fn set_end_mode(&self, mode: EndMode) {
        let _ = self.end_mode.set(mode);
    }

    /// Sets the request timeout (once, as [`set_end_mode`](Self::set_end_mode)).
    pub(crate) fn set_timeout(&self, t: std::time::Duration) {
        let _ = self.timeout.set(t);
    }

    /// Sets the receive spin (once, as [`set_end_mode`](Self::set_end_mode)).
    pub(crate) fn set_spin(&self, t: std::time::Duration) {
        let _ = self.spin.set(t);
    }

    /// How replies end requests: [`EndMode::Sticky`] unless set otherwise.
    fn end_mode(&self) -> EndMode {
        self.end_mode.get().copied().unwrap_or(EndMode::Sticky)
    }

    /// What INIT settled.
    pub(crate) fn negotiated(&self) -> Negotiated {
        self.proto
    }

    /// A fresh even unique from this thread's batch.
    fn next_unique(&self) -> u64 {
        UNIQUES.with(|c| {
            let (id, next, end) = c.get();
            if id == self.id && next < end {
                c.set((id, next + 2, end));
                return next;
            }
            // Relaxed: only uniqueness is needed, which the RMW gives.
            let start = self.next_batch.fetch_add(UNIQUE_BATCH, Ordering::Relaxed);
            c.set((self.id, start + 2, start + UNIQUE_BATCH));
            start
        })
    }

    /// Sends request `op` on node `nodeid` with the payload `args` (concatenated) as
    /// credentials `uid`/`gid`/`pid`, and waits for the answer: the reply's payload.
    ///
    /// # Errors
    /// The server's errno; `EIO` for a malformed reply; `ECONNABORTED` when the
    /// connection aborted while the request was in flight, `ENOTCONN` when it had
    /// aborted before; `E2BIG` for a request larger than the server reads; `EINVAL` for
    /// FORGET, BATCH_FORGET and INTERRUPT (never answered: they have their own paths).
    pub(crate) fn request(
        &self,
        op: u32,
        nodeid: u64,
        creds: (u32, u32, u32),
        args: &[&[u8]],
    ) -> Result<Vec<u8>> {
        self.submit(op, nodeid, creds, args, true)
    }

    /// As [`request`](Self::request), but not waited for (Linux's background requests, as
    /// `fuse_file_put`'s RELEASE): the request is in flight, or queued behind
    /// `max_background` others (module doc), when this returns, and its answer, whenever it
    /// comes, is dropped. So a caller that must not block on the server
    /// (the last close, which runs where a lock-free reader may be pinned) never does.
    ///
    /// # Errors
    /// As `request`'s, for what fails before the request is sent.
    pub(crate) fn request_background(
        &self,
        op: u32,
        nodeid: u64,
        creds: (u32, u32, u32),
        args: &[&[u8]],
    ) -> Result<()> {
        self.submit(op, nodeid, creds, args, false).map(drop)
    }

    /// The body of [`request`](Self::request) and
    /// [`request_background`](Self::request_background).
    fn submit(
        &self,
        op: u32,
        nodeid: u64,
        creds: (u32, u32, u32),
        args: &[&[u8]],
        wait: bool,
    ) -> Result<Vec<u8>> {
        // FORGET and BATCH_FORGET are never answered, INTERRUPT has its own path: waiting
        // for a reply to them would wait forever.
        if matches!(
            op,
            opcode::FUSE_FORGET | opcode::FUSE_BATCH_FORGET | opcode::FUSE_INTERRUPT
        ) {
            return Err(Errno::EINVAL);
        }
        // Relaxed: a hint; a request that passes it while the connection aborts is
        // failed by the abort (it is in the table) or by the failed send.
        if !self.connected.load(Ordering::Relaxed) {
            return Err(Errno::ENOTCONN);
        }
        let unique = self.next_unique();
        let msg = encode(op, unique, nodeid, creds, args);
        // libfuse reads into `max_write` + a 4 KiB header buffer (FUSE_BUFFER_HEADER_SIZE).
        if msg.len() > self.proto.max_write + 4096 {
            return Err(Errno::E2BIG);
        }
        self.flush_queues();
        // References: the table's in-flight one, and the waiter's when there is one.
        let p = Request::alloc(unique, if wait { 2 } else { 1 });
        // The thread's interrupter slot, if it made one (interrupt.rs).
        let slot = if wait {
            super::interrupt::current_slot()
        } else {
            None
        };
        if !wait {
            // SAFETY: ours (the table's reference, not published yet).
            unsafe { p.as_ref() }.set_background();
            let mut bg = plock(&self.bg);
            if bg.active >= usize::from(self.proto.max_background) || !bg.queue.is_empty() {
                // Sent when a background request in flight is answered.
                bg.queue.push_back((unique, msg, p));
                return Ok(Vec::new());
            }
            bg.active += 1;
        }
        self.send_request(unique, &msg, p, true);
        if !wait {
            // `p` is the table's now (freed by whoever completes it): not touched again.
            return Ok(Vec::new());
        }
        // SAFETY: our (the waiter's) reference.
        let req = unsafe { p.as_ref() };
        // Withdrawn when this call ends, however it ends (the slot names this connection).
        let _published = slot.as_deref().map(|slot| {
            if slot.publish(self, p) {
                // An interrupt was pending (a signal that came first).
                self.interrupt(req);
            }
            super::interrupt::Published(slot)
        });
        let deadline = self.timeout.get().map(|&t| std::time::Instant::now() + t);
        let waiting = Waiting::new(&self.waiting.0);
        let waited = self.lead.wait(req, &CallerWire(self), deadline);
        drop(waiting);
        // A request that timed out but was answered meanwhile has its answer.
        let r = if waited == Waited::Finished || req.finished() {
            req.take_reply().unwrap_or(Err(Errno::EIO))
        } else {
            // Linux 6.14's request timeout (`fuse_check_timeout`): a server that has not
            // answered in time is taken for dead: the connection aborts (this request and
            // every other in flight fail with ECONNABORTED, later ones with ENOTCONN) and
            // the server sees its end close (`abort` shuts the socket down).
            // Relaxed: a diagnostic counter.
            self.stats.timeouts.fetch_add(1, Ordering::Relaxed);
            self.abort(Ended::Timeout);
            req.wait_finished().unwrap_or(Err(Errno::ECONNABORTED))
        };
        drop(_published);
        // SAFETY: the waiter's reference, not used after.
        unsafe { Request::put(p) };
        r
    }

    /// Interrupts `req` (an `Interrupter`'s, interrupt.rs): `FR_INTERRUPTED`, then, unless
    /// it finished, linked on the interrupt list and a FUSE_INTERRUPT sent
    /// (`request_wait_answer`'s `queue_interrupt`, then `fuse_read_interrupt`).
    pub(crate) fn interrupt(&self, req: &Request) {
        // Relaxed: a hint; a connection that stops taking interrupts only costs the server
        // a message it answers with ENOSYS again.
        if self.no_interrupt.load(Ordering::Relaxed) {
            return;
        }
        if req.set_interrupted() & FR_FINISHED != 0 {
            return;
        }
        if self.iq.queue_interrupt(req) {
            self.send_interrupts(true);
        }
    }

    /// Sends a FUSE_INTERRUPT for every request on the interrupt list (each unlinked as
    /// its message is built). Without `block` (a receiver), a full socket drops the
    /// message: an interrupt is a request to the server, which may ignore it anyway.
    fn send_interrupts(&self, block: bool) {
        if !block && self.framing == Framing::Stream {
            // A stream's message must not be cut or slipped between another sender's
            // pieces: the next caller sends it (under `send_lock`).
            // Relaxed: a hint, as `bg_stalled`.
            self.intr_stalled.store(true, Ordering::Relaxed);
            return;
        }
        while let Some((intr, target)) = self.iq.read_interrupt() {
            let arg = abi::InterruptIn { unique: target };
            let msg = encode(
                opcode::FUSE_INTERRUPT,
                intr,
                0,
                (0, 0, 0),
                &[arg.as_bytes()],
            );
            let sent = if block {
                self.send_msg(&msg).map(drop)
            } else {
                let flags = SendFlags::NOSIGNAL | SendFlags::DONTWAIT;
                rustix::net::send(&self.sock, &msg, flags).map(drop)
            };
            if sent.is_err() {
                // Not sent: linked again (if still in flight) for the next caller to send;
                // an EAGAIN'd interrupt means the server has not seen the request yet, and
                // dropping it would leave its caller waiting.
                let shard = self.shard(target);
                if let Some(&p) = shard.get(&target) {
                    // SAFETY: in the table, so allocated while the shard's lock is held.
                    self.iq.queue_interrupt(unsafe { p.as_ref() });
                }
                drop(shard);
                // Relaxed: a hint, as `bg_stalled`.
                self.intr_stalled.store(true, Ordering::Relaxed);
                return;
            }
        }
    }

    /// The server's answer to an interrupt (an odd unique): `EAGAIN` asks for it again
    /// while the request is in flight, `ENOSYS` says the server takes none
    /// (`fuse_dev_do_write`); anything else is dropped.
    pub(crate) fn interrupt_reply(&self, unique: u64, err: Option<Errno>) {
        match err {
            Some(Errno::ENOSYS) => {
                // Relaxed: a hint (see `interrupt`).
                self.no_interrupt.store(true, Ordering::Relaxed);
            }
            Some(Errno::EAGAIN) => {
                let target = unique & !super::request::FUSE_INT_REQ_BIT;
                let shard = self.shard(target);
                if let Some(&p) = shard.get(&target) {
                    // SAFETY: in the table, so allocated while the shard's lock is held
                    // (its completion takes it out under this lock first).
                    if self.iq.queue_interrupt(unsafe { p.as_ref() }) {
                        drop(shard);
                        self.send_interrupts(false);
                    }
                }
            }
            _ => {}
        }
    }

    /// Puts request `p` (`unique`, message `msg`) in the table and sends it; a failed
    /// send completes it with the errno (`EPIPE`: `ENOTCONN`). With `block` false (the
    /// receiver), a full socket is [`Sent::Full`] with nothing done: the caller keeps `p`.
    fn send_request(&self, unique: u64, msg: &[u8], p: NonNull<Request>, block: bool) -> Sent {
        if !block {
            if self.framing == Framing::Stream {
                // A partial send would have to be finished by blocking.
                return Sent::Full;
            }
            // Whether the socket has room is only known by trying: send under the shard's
            // lock, then publish (a reply, which needs that lock to find the request,
            // cannot be matched before the insert).
            let mut shard = self.shard(unique);
            let flags = SendFlags::NOSIGNAL | SendFlags::DONTWAIT;
            match rustix::net::send(&self.sock, msg, flags) {
                Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => return Sent::Full,
                Ok(_) => {
                    shard.insert(unique, p);
                    return Sent::Done;
                }
                Err(e) => {
                    drop(shard);
                    // SAFETY: the table's reference, never published: ours to complete.
                    let r = unsafe { p.as_ref() };
                    r.complete(&self.iq, self.end_mode(), Err(gone(e)));
                    // SAFETY: as above, not used after.
                    unsafe { Request::put(p) };
                    // The caller counts it out of the background (no recursion through
                    // `background_done` per queued request: a dead server fails them all).
                    return Sent::Failed;
                }
            }
        }
        self.shard(unique).insert(unique, p);
        // Checked again after the insert: an abort that ran before it did not see us. The
        // shard's lock orders the two: either our insert came before the abort drained
        // this shard (the abort fails the request), or after, and then the abort's store
        // of `false`, made before it took the shard's lock, is visible to us now. Acquire:
        // pairs with that Release store (the lock alone would do).
        if !self.connected.load(Ordering::Acquire) {
            self.fail_if_present(unique, Errno::ENOTCONN);
        } else if let Err(e) = self.send_msg(msg) {
            let e = Errno::from(e);
            self.fail_if_present(
                unique,
                if e == Errno::EPIPE {
                    Errno::ENOTCONN
                } else {
                    e
                },
            );
        }
        Sent::Done
    }

    /// A background request finished (answered, failed or aborted): one fewer in flight,
    /// and the queue's next goes out, from the receiver without blocking (see the module
    /// doc). Nothing for a request that is not a background one.
    fn background_done(&self, r: &Request) {
        if r.flags() & FR_BACKGROUND == 0 {
            return;
        }
        let mut bg = plock(&self.bg);
        bg.active = bg.active.saturating_sub(1);
        drop(bg);
        self.flush_background(false);
    }

    /// Sends queued background requests while fewer than `max_background` are in flight;
    /// with `block` false, stops at a full socket and leaves the rest for the next request.
    /// The lock is not held while sending (a failed send completes the request, which
    /// takes it).
    fn flush_background(&self, block: bool) {
        loop {
            let (unique, msg, p) = {
                let mut bg = plock(&self.bg);
                // Relaxed: a hint (see `submit`).
                let next = (bg.active < usize::from(self.proto.max_background)
                    && self.connected.load(Ordering::Relaxed))
                .then(|| bg.queue.pop_front())
                .flatten();
                let Some(next) = next else {
                    // Relaxed: a hint under `bg` (see the field); tested first (lesson 3:
                    // every background reply comes here).
                    if self.bg_stalled.load(Ordering::Relaxed) {
                        // Relaxed: as above.
                        self.bg_stalled.store(false, Ordering::Relaxed);
                    }
                    return;
                };
                bg.active += 1;
                next
            };
            match self.send_request(unique, &msg, p, block) {
                Sent::Done => {}
                Sent::Failed => plock(&self.bg).active -= 1,
                Sent::Full => {
                    let mut bg = plock(&self.bg);
                    bg.active -= 1;
                    bg.queue.push_front((unique, msg, p));
                    // Relaxed: a hint under `bg` (see the field).
                    self.bg_stalled.store(true, Ordering::Relaxed);
                    return;
                }
            }
        }
    }

    /// Before a request goes out: the FORGETs queued so far, and background requests the
    /// receivers could not send.
    fn flush_queues(&self) {
        // Relaxed: hints (see the fields); a stale `false` leaves the work to the next
        // request, a stale `true` costs a lock.
        if self.forgets_queued.load(Ordering::Relaxed) {
            self.send_forgets(&self.take_forgets());
        }
        // Relaxed: as above.
        if self.bg_stalled.load(Ordering::Relaxed) {
            self.flush_background(true);
        }
        // Relaxed: as above.
        if self.intr_stalled.load(Ordering::Relaxed) {
            // Relaxed: as above; cleared before the sends, so one that stalls again sets it.
            self.intr_stalled.store(false, Ordering::Relaxed);
            self.send_interrupts(true);
        }
    }

    /// `fuse_queue_forget`: the server may drop `nlookup` of its lookups of `nodeid`
    /// (an evicted inode). Queued; sent in batches (module doc). Never answered.
    pub(crate) fn forget(&self, nodeid: u64, nlookup: u64) {
        let batch = {
            let mut q = plock(&self.forgets);
            q.ones.push(abi::ForgetOne { nodeid, nlookup });
            if q.ones.len() == 1 {
                // Relaxed: under the lock (see the field); set once per batch (lesson 3).
                self.forgets_queued.store(true, Ordering::Relaxed);
            }
            // A stream socket only queues: a partial send would have to be finished by
            // blocking.
            if q.ones.len() < FORGET_BATCH || q.stalled || self.framing == Framing::Stream {
                return;
            }
            // Relaxed: as above.
            self.forgets_queued.store(false, Ordering::Relaxed);
            // FORGET_BATCH of them: each batch is taken when it fills, unless stalled.
            std::mem::take(&mut q.ones)
        };
        let unsent = self.try_send_forgets(&batch);
        if !unsent.is_empty() {
            let mut q = plock(&self.forgets);
            // In front of what other evictions queued meanwhile.
            let later = std::mem::replace(&mut q.ones, unsent.to_vec());
            q.ones.extend(later);
            q.stalled = true;
            // Relaxed: under the lock (see the field).
            self.forgets_queued.store(true, Ordering::Relaxed);
        }
    }

    /// Sends `batch` as BATCH_FORGETs without blocking (a `SOCK_SEQPACKET` socket: one
    /// message whole or not at all); returns the part not sent, from the first message a
    /// full socket refused. Never blocks: [`forget`](Self::forget) may run on a receiver,
    /// and a receiver blocked on a full socket while the server blocks on its replies to
    /// us would deadlock both.
    fn try_send_forgets<'a>(&self, batch: &'a [abi::ForgetOne]) -> &'a [abi::ForgetOne] {
        let mut rest = batch;
        while !rest.is_empty() {
            // Relaxed: a hint, as in `send_oneway`.
            if !self.connected.load(Ordering::Relaxed) {
                // Nobody to tell: a dead server forgot everything.
                return &[];
            }
            let (now, later) = rest.split_at(rest.len().min(FORGET_MAX));
            let msg = self.forget_msg(now);
            let flags = SendFlags::NOSIGNAL | SendFlags::DONTWAIT;
            match rustix::net::send(&self.sock, &msg, flags) {
                Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => return rest,
                // A failed socket aborts the connection where the receivers see it.
                Ok(_) | Err(_) => rest = later,
            }
        }
        rest
    }

    /// The message for `batch` (not empty, at most [`FORGET_MAX`]): a FORGET for one, a
    /// BATCH_FORGET for more.
    fn forget_msg(&self, batch: &[abi::ForgetOne]) -> Vec<u8> {
        if let [one] = batch {
            let arg = abi::ForgetIn {
                nlookup: one.nlookup,
            };
            return encode(
                opcode::FUSE_FORGET,
                self.next_unique(),
                one.nodeid,
                (0, 0, 0),
                &[arg.as_bytes()],
            );
        }
        let head = abi::BatchForgetIn {
            count: batch.len() as u32,
            dummy: 0,
        };
        encode(
            opcode::FUSE_BATCH_FORGET,
            self.next_unique(),
            0,
            (0, 0, 0),
            &[head.as_bytes(), batch.as_bytes()],
        )
    }

    /// At unmount, before DESTROY: sends the queued background requests (blocking) and
    /// waits, at most `limit`, until none is in flight, so that the server runs every
    /// RELEASE before DESTROY (Linux sends RELEASE synchronously on a connection that will
    /// get DESTROY). Not waited for on the reader thread (nobody else may be receiving
    /// the answers: it receives when no caller does, leader.rs).
    pub(crate) fn drain_background(&self, limit: std::time::Duration) {
        let deadline = std::time::Instant::now() + limit;
        let on_reader = plock(&self.reader)
            .as_ref()
            .is_some_and(|h| h.thread().id() == std::thread::current().id());
        loop {
            self.flush_background(true);
            let idle = {
                let bg = plock(&self.bg);
                bg.active == 0 && bg.queue.is_empty()
            };
            // Relaxed: a hint; an aborted connection answers nothing more.
            if idle || on_reader || !self.connected.load(Ordering::Relaxed) {
                return;
            }
            if std::time::Instant::now() >= deadline {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Sends every queued FORGET now (unmount, before DESTROY).
    pub(crate) fn flush_forgets(&self) {
        self.send_forgets(&self.take_forgets());
    }

    /// The queued FORGETs, for a send that may block: the queue is empty and not stalled
    /// after.
    fn take_forgets(&self) -> Vec<abi::ForgetOne> {
        let mut q = plock(&self.forgets);
        // Relaxed: under the lock that orders it with the queue (see the field).
        self.forgets_queued.store(false, Ordering::Relaxed);
        q.stalled = false;
        std::mem::take(&mut q.ones)
    }

    /// `batch` as BATCH_FORGETs of at most [`FORGET_MAX`] (a FORGET for one), blocking on
    /// a full socket: only from a caller's thread (`flush_queues`) or at unmount.
    fn send_forgets(&self, batch: &[abi::ForgetOne]) {
        for chunk in batch.chunks(FORGET_MAX) {
            // Relaxed: a hint, as in `send_oneway`; a send to a closed peer fails anyway.
            if !self.connected.load(Ordering::Relaxed) {
                return;
            }
            let _ = self.send_msg(&self.forget_msg(chunk));
        }
    }

    /// Sends a message no reply answers (FORGET, BATCH_FORGET; DESTROY at unmount, whose
    /// reply, if one comes before the connection closes, is dropped as unknown) and
    /// returns at once.
    ///
    /// # Errors
    /// `ENOTCONN` once the connection aborted; the socket's errno.
    pub(crate) fn send_oneway(&self, op: u32, nodeid: u64, args: &[&[u8]]) -> Result<()> {
        // Relaxed: a hint, as in `request`; a send to a closed peer fails on its own.
        if !self.connected.load(Ordering::Relaxed) {
            return Err(Errno::ENOTCONN);
        }
        let msg = encode(op, self.next_unique(), nodeid, (0, 0, 0), args);
        self.send_msg(&msg).map_err(Errno::from)
    }

    /// Sends one message (whole, not interleaved with another sender's).
    fn send_msg(&self, msg: &[u8]) -> rustix::io::Result<()> {
        match self.framing {
            Framing::Packet => send_all(&self.sock, msg).map(drop),
            Framing::Stream => {
                let _g = plock(&self.send_lock);
                send_all(&self.sock, msg).map(drop)
            }
        }
    }

    /// Tests: puts `p` in the table as if sent.
    #[cfg(test)]
    pub(crate) fn shard_insert_for_test(&self, unique: u64, p: NonNull<Request>) {
        self.shard(unique).insert(unique, p);
    }

    /// Tests: the next interrupt the list holds.
    #[cfg(test)]
    pub(crate) fn iq_read_interrupt_for_test(&self) -> Option<(u64, u64)> {
        self.iq.read_interrupt()
    }

    /// Tests: completes request `unique` with an empty answer.
    #[cfg(test)]
    pub(crate) fn complete_for_test(&self, unique: u64) -> bool {
        self.complete(unique, Ok(Vec::new()))
    }

    /// The locked shard of `unique`.
    fn shard(
        &self,
        unique: u64,
    ) -> crate::sync::plain::MutexGuard<'_, HashMap<u64, NonNull<Request>>> {
        plock(&self.processing[((unique >> 1) as usize) % SHARDS].0)
    }

    /// Takes request `unique` out of the table and completes it with `r`, if it is still
    /// there (a receiver may have answered it meanwhile).
    fn complete(&self, unique: u64, r: Result<Vec<u8>>) -> bool {
        let Some(p) = self.shard(unique).remove(&unique) else {
            return false;
        };
        // SAFETY: the table's in-flight reference, now ours.
        let req = unsafe { p.as_ref() };
        #[cfg(test)]
        if std::thread::current().name() == Some(READER_NAME) {
            // Relaxed: a test counter.
            self.stats.by_reader.fetch_add(1, Ordering::Relaxed);
        }
        req.complete(&self.iq, self.end_mode(), r);
        self.background_done(req);
        // SAFETY: the in-flight reference, not used after.
        unsafe { Request::put(p) };
        true
    }

    fn fail_if_present(&self, unique: u64, e: Errno) {
        self.complete(unique, Err(e));
    }

    /// Why the server is gone, in words, once the connection aborted (`None` while it
    /// serves): `did not answer within the request timeout`, or `closed the connection`
    /// followed, for a server started by [`Conn::spawn`] whose process has exited (reaped
    /// now), by `; the process uvfs started exited with status 1` or `; ... was killed by
    /// signal 9`.
    pub(crate) fn ended(&self) -> Option<String> {
        // Acquire: pairs with `abort`'s Release store (its reason was set before).
        if self.connected.load(Ordering::Acquire) {
            return None;
        }
        let why = *self.why_ended.get()?;
        let exit = plock(&self.child)
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten());
        let what = match why {
            Ended::Timeout => return Some("did not answer within the request timeout".into()),
            Ended::Closed => "closed the connection",
            Ended::Unmounted => "was disconnected at unmount",
        };
        // The process uvfs started: the server itself, or (a server that puts itself in
        // the background) the parent that exited at once.
        Some(match exit {
            Some(st) => match (
                st.code(),
                std::os::unix::process::ExitStatusExt::signal(&st),
            ) {
                (Some(c), _) => format!("{what}; the process uvfs started exited with status {c}"),
                (None, Some(s)) => {
                    format!("{what}; the process uvfs started was killed by signal {s}")
                }
                _ => format!("{what}; the process uvfs started ended ({st})"),
            },
            None => what.to_owned(),
        })
    }

    /// Shuts the connection at unmount, after DESTROY (`fuse_conn_destroy`'s
    /// `fuse_abort_conn`): the server sees EOF; requests fail with `ENOTCONN`.
    pub(crate) fn disconnect(&self) {
        self.abort(Ended::Unmounted);
    }

    /// `fuse_abort_conn`: marks the connection dead (for `why`, if it is the first abort)
    /// and fails every request in flight with `ECONNABORTED`.
    fn abort(&self, why: Ended) {
        let _ = self.why_ended.set(why);
        // Release: pairs with `request`'s Acquire re-check (see there).
        self.connected.store(false, Ordering::Release);
        // The server sees its end close, and a leader blocked in a receive wakes (EOF).
        let _ = rustix::net::shutdown(&self.sock, rustix::net::Shutdown::Both);
        // Queued background requests never went out: nobody waits on them.
        let queued: Vec<_> = plock(&self.bg).queue.drain(..).collect();
        for (_, _, p) in queued {
            // SAFETY: the queue's reference (never published), not used after.
            unsafe { Request::put(p) };
        }
        for s in &self.processing {
            let drained: Vec<(u64, NonNull<Request>)> = plock(&s.0).drain().collect();
            for (_, p) in drained {
                // SAFETY: the in-flight reference, taken out of the table.
                let r = unsafe { p.as_ref() };
                if r.flags() & FR_FINISHED == 0 {
                    r.complete(&self.iq, self.end_mode(), Err(Errno::ECONNABORTED));
                }
                // SAFETY: the in-flight reference, not used after.
                unsafe { Request::put(p) };
            }
        }
    }
}

impl Drop for Conn {
    /// Closes the connection: the server sees EOF and exits (libfuse's loop ends on it);
    /// it is waited for, killed if it has not exited within a second.
    fn drop(&mut self) {
        let _ = rustix::net::shutdown(&self.sock, rustix::net::Shutdown::Both);
        self.lead.close();
        if let Some(h) = plock(&self.reader).take() {
            // The reader itself may drop the last reference (it upgrades its weak one per
            // message): then it is exiting anyway (its next receive sees the shutdown).
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
        // Background requests still in the table (a RELEASE the server never answered)
        // are freed: nobody waits on them (a waiter would hold the connection).
        self.abort(Ended::Unmounted);
        if let Some(mut c) = plock(&self.child).take() {
            for _ in 0..100 {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `send` of the whole of `msg` (one packet; or, on a stream, as many pieces as the socket
/// takes), retried when a signal interrupts it (`EINTR`).
fn send_all(fd: &OwnedFd, mut msg: &[u8]) -> rustix::io::Result<usize> {
    let total = msg.len();
    while !msg.is_empty() {
        match rustix::net::send(fd, msg, SendFlags::NOSIGNAL) {
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e),
            Ok(n) => msg = &msg[n..],
        }
    }
    Ok(total)
}

/// Reads exactly `buf.len()` bytes from a stream; `Ok(false)` at end of file before the
/// first byte. An end of file inside is `ECONNRESET` (the server died mid-message).
fn read_exact(fd: &OwnedFd, buf: &mut [u8]) -> rustix::io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match rustix::net::recv(fd, &mut buf[got..], RecvFlags::empty()) {
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e),
            Ok((0, _)) if got == 0 => return Ok(false),
            Ok((0, _)) => return Err(rustix::io::Errno::CONNRESET),
            Ok((n, _)) => got += n,
        }
    }
    Ok(true)
}

/// Receives one message into `buf`: `Ok(Some((received, full length)))` (`full >
/// received`: the message did not fit and its rest was dropped), `Ok(None)` at end of
/// file. On a stream, a header whose length is below a header's or above `buf` is
/// `EPROTO`: the framing is lost and the connection cannot go on.
fn recv_msg(
    fd: &OwnedFd,
    framing: Framing,
    buf: &mut [u8],
) -> rustix::io::Result<Option<(usize, usize)>> {
    match framing {
        Framing::Packet => loop {
            match rustix::net::recv(fd, &mut buf[..], RecvFlags::TRUNC) {
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e),
                Ok((_, 0)) => return Ok(None),
                Ok((n, full)) => return Ok(Some((n, full))),
            }
        },
        Framing::Stream => {
            let h = std::mem::size_of::<abi::OutHeader>();
            if !read_exact(fd, &mut buf[..h])? {
                return Ok(None);
            }
            let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
            if len < h || len > buf.len() {
                return Err(rustix::io::Errno::PROTO);
            }
            if !read_exact(fd, &mut buf[h..len])? && len > h {
                return Err(rustix::io::Errno::CONNRESET);
            }
            Ok(Some((len, len)))
        }
    }
}

/// Receives one message on `fd` into `buf` (blocking; with `deadline`, `TimedOut` when
/// none came by then) and acts on it for `conn` (leader.rs's [`Wire::receive`]): EOF or
/// a socket error aborts the connection (`Closed`).
fn receive(
    conn: &Conn,
    fd: &OwnedFd,
    framing: Framing,
    buf: &mut [u8],
    deadline: Option<std::time::Instant>,
    for_reader: bool,
) -> Received {
    if let Some(d) = deadline {
        // EINTR (a signal's handler ran) is a `false` before the deadline: look again. Past
        // the deadline nothing more is received (a busy connection would keep a leader
        // whose request timed out receiving).
        loop {
            let left = d.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Received::TimedOut;
            }
            if poll_in(fd, Some(left)) {
                break;
            }
        }
    }
    if !for_reader {
        if let Some(&spin) = conn.spin.get() {
            spin_for_message(conn, fd, spin);
        }
    }
    let got = recv_msg(fd, framing, buf);
    let (n, full) = match got {
        Ok(Some(r)) => r,
        Ok(None) | Err(_) => {
            if matches!(got, Err(rustix::io::Errno::PROTO)) {
                // Relaxed: a diagnostic counter.
                conn.stats.proto_errors.fetch_add(1, Ordering::Relaxed);
            }
            conn.abort(Ended::Closed);
            return Received::Closed;
        }
    };
    if full > n {
        // Larger than any reply uvfs asked for: fail the request it names.
        // Relaxed: a diagnostic counter.
        conn.stats.proto_errors.fetch_add(1, Ordering::Relaxed);
        if let Ok((h, _)) = <abi::OutHeader as zerocopy::FromBytes>::read_from_prefix(&buf[..n]) {
            conn.fail_if_present(h.unique, Errno::EIO);
        }
        return Received::Dispatched;
    }
    match dispatch(conn, &buf[..n], for_reader) {
        true => Received::Dispatched,
        false => Received::ForReader(buf[..n].to_vec()),
    }
}

thread_local! {
    /// Requests this thread still receives without spinning (after a spin that found no
    /// message).
    static SPIN_SKIP: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// One caller counted in [`Conn::waiting`] while it lives (a guard: a panic in the wait
/// must not leave the count raised, which would turn the spin off for good).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        // Relaxed: a count of waiters, a hint for the receive spin (`spin_for_message`);
        // nothing is published through it.
        count.fetch_add(1, Ordering::Relaxed);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        // Relaxed: as in `new`.
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A receiving caller's look before it sleeps (`FuseClientOptions::receive_spin`): polls
/// `fd` without waiting until a message is there or `limit` passed; a look that found
/// none skips the next [`SPIN_BACKOFF`](super::fs::SPIN_BACKOFF) ones on this thread. No
/// look while more than [`Conn::spin_waiters`] callers wait (the caller sleeps at once),
/// and the look stops when that happens.
fn spin_for_message(conn: &Conn, fd: &OwnedFd, limit: std::time::Duration) {
    if limit.is_zero() {
        return;
    }
    let skip = SPIN_SKIP.get();
    if skip > 0 {
        SPIN_SKIP.set(skip - 1);
        return;
    }
    // Relaxed: a hint (see `Conn::waiting`); a stale value lets one caller spin or sleep
    // when the other would have been better, nothing more.
    if conn.waiting.0.load(Ordering::Relaxed) > conn.spin_waiters {
        return;
    }
    let start = std::time::Instant::now();
    while !poll_in(fd, Some(std::time::Duration::ZERO)) {
        if start.elapsed() >= limit {
            SPIN_SKIP.set(super::fs::SPIN_BACKOFF);
            return;
        }
        // Another caller began to wait: its server thread needs this CPU more.
        // Relaxed: as above.
        if conn.waiting.0.load(Ordering::Relaxed) > conn.spin_waiters {
            return;
        }
        std::hint::spin_loop();
    }
}

/// Whether `fd` has a message (or its end) to receive, waiting at most `timeout` (`None`:
/// until it has); `EINTR` is a `false` for a bounded wait, retried for an unbounded one.
fn poll_in(fd: &OwnedFd, timeout: Option<std::time::Duration>) -> bool {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let ts = timeout.map(|t| Timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as i64,
        tv_nsec: i64::from(t.subsec_nanos()),
    });
    loop {
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        match poll(&mut fds, ts.as_ref()) {
            Ok(n) => return n > 0,
            Err(rustix::io::Errno::INTR) if timeout.is_none() => continue,
            Err(_) => return timeout.is_none(),
        }
    }
}

/// The reader thread's idle look: waits until `fd` has a message (or its end) or `wake`
/// (an eventfd) was written, and empties `wake`; returns on any error too (the caller
/// looks at the state again either way).
fn poll_in_or_woken(fd: &OwnedFd, wake: &OwnedFd) {
    use rustix::event::{poll, PollFd, PollFlags};
    loop {
        let mut fds = [
            PollFd::new(fd, PollFlags::IN),
            PollFd::new(wake, PollFlags::IN),
        ];
        match poll(&mut fds, None) {
            Err(rustix::io::Errno::INTR) => continue,
            Ok(_) if fds[1].revents().contains(PollFlags::IN) => {
                // Non-blocking: the count goes to 0 (a wake after this read is seen by the
                // next look).
                let _ = rustix::io::read(wake, &mut [0u8; 8]);
                return;
            }
            _ => return,
        }
    }
}

/// Writes 1 to the eventfd `wake` (see [`poll_in_or_woken`]); a full counter (it is read
/// at each look) cannot block: non-blocking, the wake is pending anyway.
fn wake_reader(wake: &OwnedFd) {
    let _ = rustix::io::write(wake, &1u64.to_ne_bytes());
}

/// A caller's receive side: the connection's own socket.
struct CallerWire<'a>(&'a Conn);

impl Wire for CallerWire<'_> {
    fn receive(
        &self,
        buf: &mut Vec<u8>,
        deadline: Option<std::time::Instant>,
        for_reader: bool,
    ) -> Received {
        let c = self.0;
        receive(c, &c.sock, c.framing, buf, deadline, for_reader)
    }

    fn ready(&self, timeout: Option<std::time::Duration>) -> bool {
        poll_in(&self.0.sock, timeout)
    }

    fn wake(&self) {
        wake_reader(&self.0.wake);
    }

    /// Not called (only the reader thread applies notifications); as the reader's.
    fn apply(&self, msg: &[u8]) {
        dispatch(self.0, msg, true);
    }
}

/// The reader thread's receive side: its own descriptor of the socket, and the connection
/// only while it acts on a message (so that the connection can go while it waits).
struct ReaderWire {
    fd: OwnedFd,
    /// The connection's eventfd (see [`poll_in_or_woken`]).
    wake: OwnedFd,
    framing: Framing,
    conn: std::sync::Weak<Conn>,
}

impl Wire for ReaderWire {
    fn receive(
        &self,
        buf: &mut Vec<u8>,
        deadline: Option<std::time::Instant>,
        for_reader: bool,
    ) -> Received {
        let Some(conn) = self.conn.upgrade() else {
            return Received::Closed;
        };
        receive(&conn, &self.fd, self.framing, buf, deadline, for_reader)
    }

    fn ready(&self, timeout: Option<std::time::Duration>) -> bool {
        match timeout {
            None => {
                poll_in_or_woken(&self.fd, &self.wake);
                true
            }
            Some(_) => poll_in(&self.fd, timeout),
        }
    }

    fn wake(&self) {
        wake_reader(&self.wake);
    }

    fn apply(&self, msg: &[u8]) {
        if let Some(conn) = self.conn.upgrade() {
            dispatch(&conn, msg, true);
        }
    }
}

/// Acts on one message from the server; `false` (and nothing done) for a notification
/// when `notify` is false (a caller's receive: the reader thread applies it, leader.rs).
fn dispatch(conn: &Conn, msg: &[u8], notify: bool) -> bool {
    use zerocopy::FromBytes;
    match abi::parse_message(msg) {
        Ok(Message::Reply { unique, result }) if unique & super::request::FUSE_INT_REQ_BIT != 0 => {
            conn.interrupt_reply(unique, result.err());
        }
        Ok(Message::Reply { unique, result }) => {
            if !conn.complete(unique, result.map(<[u8]>::to_vec)) {
                // Relaxed: a diagnostic counter.
                conn.stats.unknown_uniques.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(Message::Notify { .. }) if !notify => return false,
        Ok(Message::Notify { code, payload }) => match conn.notify.get() {
            Some(f) => f(code, payload),
            None => {
                // No file system over the connection yet: nothing to apply it to.
                // Relaxed: a diagnostic counter.
                conn.stats.proto_errors.fetch_add(1, Ordering::Relaxed);
            }
        },
        Err(_) => {
            // Relaxed: a diagnostic counter.
            conn.stats.proto_errors.fetch_add(1, Ordering::Relaxed);
            if let Ok((h, _)) = abi::OutHeader::read_from_prefix(msg) {
                if h.unique != 0 {
                    conn.fail_if_present(h.unique, Errno::EIO);
                }
            }
        }
    }
    true
}

/// One request message: header and payload.
fn encode(op: u32, unique: u64, nodeid: u64, creds: (u32, u32, u32), args: &[&[u8]]) -> Vec<u8> {
    let len = std::mem::size_of::<InHeader>() + args.iter().map(|a| a.len()).sum::<usize>();
    let h = InHeader {
        len: len as u32,
        opcode: op,
        unique,
        nodeid,
        uid: creds.0,
        gid: creds.1,
        pid: creds.2,
        total_extlen: 0,
        padding: 0,
    };
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(h.as_bytes());
    for a in args {
        v.extend_from_slice(a);
    }
    v
}

/// Asks for [`SOCK_BUF`] on both directions of `fd` (forced where permitted, i.e. as
/// root; else as much as `net.core.[rw]mem_max` allows).
fn size_buffers(fd: &OwnedFd) {
    if rustix::net::sockopt::set_socket_send_buffer_size_force(fd, SOCK_BUF).is_err() {
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(fd, SOCK_BUF);
    }
    if rustix::net::sockopt::set_socket_recv_buffer_size_force(fd, SOCK_BUF).is_err() {
        let _ = rustix::net::sockopt::set_socket_recv_buffer_size(fd, SOCK_BUF);
    }
}

/// The largest read or write payload one packet carries on `fd`'s pair (both ends were
/// sized alike): half the send buffer the kernel granted (its accounting counts
/// overhead), less a page for headers, in whole pages, at most [`MAX_IO`].
fn io_cap(fd: &OwnedFd) -> usize {
    let snd = rustix::net::sockopt::socket_send_buffer_size(fd).unwrap_or(212_992);
    ((snd / 2).saturating_sub(4096) & !4095).clamp(4096, MAX_IO)
}

/// Clears `FD_CLOEXEC` on `fd` (in the child, before exec). Async-signal-safe.
fn libc_fcntl_clear_cloexec(fd: i32) -> bool {
    // SAFETY: `fd` is open in the child (inherited); fcntl on it is async-signal-safe.
    let bfd = unsafe { rustix::fd::BorrowedFd::borrow_raw(fd) };
    rustix::io::fcntl_setfd(bfd, rustix::io::FdFlags::empty()).is_ok()
}

/// A socket error of the handshake: the server's end closed (it exited: `EPIPE` on a
/// send, `ECONNRESET` on a receive with our packet unread) is `ECONNABORTED`, as an EOF.
fn gone(e: rustix::io::Errno) -> Errno {
    match Errno::from(e) {
        Errno::EPIPE | Errno::ECONNRESET => Errno::ECONNABORTED,
        e => e,
    }
}

/// Asked every [`CANCEL_LOOK`] while INIT's answer is awaited: `true` gives up
/// (`ECANCELED`). `None`: wait the whole [`INIT_TIMEOUT`].
pub(crate) type Cancel = Option<fn() -> bool>;

/// How often [`Cancel`] is asked: 100 ms.
const CANCEL_LOOK: std::time::Duration = std::time::Duration::from_millis(100);

/// INIT (`fuse_send_init`, `process_init_reply`) on `fd` before the reader runs, with
/// reads and writes capped to `cap` bytes; `cancel` asked while the answer is awaited.
fn handshake(fd: &OwnedFd, framing: Framing, cap: usize, cancel: Cancel) -> Result<Negotiated> {
    let arg = InitIn {
        major: abi::FUSE_KERNEL_VERSION,
        minor: OFFER_MINOR,
        max_readahead: cap as u32,
        flags: OFFER_FLAGS as u32,
        flags2: (OFFER_FLAGS >> 32) as u32,
        unused: [0; 11],
    };
    let msg = encode(opcode::FUSE_INIT, 2, 0, (0, 0, 0), &[arg.as_bytes()]);
    send_all(fd, &msg).map_err(gone)?;
    let mut buf = vec![0u8; 4096];
    // The answer (or EOF) awaited in slices, `cancel` asked between them; a signal does
    // not lengthen the wait (each `recv` with a timeout would start it again).
    let deadline = std::time::Instant::now() + INIT_TIMEOUT;
    loop {
        if cancel.is_some_and(|c| c()) {
            return Err(Errno::ECANCELED);
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(Errno::ETIMEDOUT);
        }
        if poll_in(fd, Some(left.min(CANCEL_LOOK))) {
            break;
        }
    }
    // A server that sends part of a message and stops must not block the caller for good.
    let timeout = rustix::net::sockopt::Timeout::Recv;
    rustix::net::sockopt::set_socket_timeout(fd, timeout, Some(INIT_TIMEOUT))
        .map_err(Errno::from)?;
    let got = recv_msg(fd, framing, &mut buf);
    rustix::net::sockopt::set_socket_timeout(fd, timeout, None).map_err(Errno::from)?;
    let (n, full) = match got {
        Ok(None) => return Err(Errno::ECONNABORTED),
        Ok(Some(r)) => r,
        Err(rustix::io::Errno::AGAIN) => return Err(Errno::ETIMEDOUT),
        Err(e) => return Err(gone(e)),
    };
    if full > n {
        return Err(Errno::EPROTO);
    }
    let payload = match abi::parse_message(&buf[..n]) {
        Ok(Message::Reply {
            unique: 2,
            result: Ok(p),
        }) => p,
        _ => return Err(Errno::EPROTO),
    };
    // Servers before 7.23 send shorter replies; refused below by the minor anyway, but
    // a reply must at least hold the fields read.
    let mut out = InitOut::default();
    let take = payload.len().min(std::mem::size_of::<InitOut>());
    if take < 24 {
        return Err(Errno::EPROTO);
    }
    out.as_mut_bytes()[..take].copy_from_slice(&payload[..take]);
    if out.major != abi::FUSE_KERNEL_VERSION || out.minor < abi::FUSE_MIN_MINOR_VERSION {
        return Err(Errno::EPROTO);
    }
    let mut flags = out.flags as u64;
    if flags & init::FUSE_INIT_EXT != 0 {
        flags |= (out.flags2 as u64) << 32;
    }
    flags &= OFFER_FLAGS;
    let max_write = (out.max_write as usize).clamp(4096, cap);
    // 0 means Linux's default (FUSE_DEFAULT_MAX_BACKGROUND).
    let max_background = if out.max_background == 0 {
        12
    } else {
        out.max_background
    };
    Ok(Negotiated {
        minor: out.minor.min(OFFER_MINOR),
        flags,
        max_write,
        max_read: cap,
        max_background,
        // Linux's default is three quarters of max_background
        // (FUSE_DEFAULT_CONGESTION_THRESHOLD), kept when the server sends 0.
        congestion_threshold: if out.congestion_threshold == 0 {
            // In u32: 3 * max_background overflows u16 from 21846 on.
            (u32::from(max_background) * 3 / 4) as u16
        } else {
            out.congestion_threshold
        },
    })
}
