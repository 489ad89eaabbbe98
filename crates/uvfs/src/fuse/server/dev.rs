//! uvfs's own `/dev/fuse` loop (the classic transport without fuser's session): INIT and
//! every request read by uvfs and served through [`UvfsFuse::dispatch`], by several reader
//! threads on one descriptor, so that a `FUSE_INTERRUPT` can be read while a request blocks
//! (fuser 0.18's session answers it `ENOSYS`, which turns interrupts off for the
//! connection: `fc->no_interrupt`).
//!
//! Linux analogue: libfuse lib/fuse_loop_mt.c (`fuse_session_loop_mt`: worker threads that
//! each read a request and serve it, each on its own clone of the descriptor,
//! `FUSE_DEV_IOC_CLONE`, as fuser's session did: a clone has its own processing queue and
//! its lock, so readers share only the connection's input queue). A reader writes each
//! reply on the descriptor it read the request from: `fuse_dev_do_write` looks the request
//! up in that descriptor's processing queue (`request_find`).
//!
//! The one `unsafe` here is that ioctl's glue (`clone_dev`).
//!
//! # Invariants
//! - Every reader leaves only when `/dev/fuse` says the connection is gone (`ENODEV`,
//!   `ECONNABORTED`) or on an error of its own; the caller returns after all have left.
//! - No locks; each reader owns its buffers; request counts are the readers' own until
//!   they are joined.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use zerocopy::FromBytes;

use super::{abi, dispatch::MAX_WRITE, UvfsFuse};

/// The read buffer of a `/dev/fuse` reader: the largest request (a WRITE of `MAX_WRITE`
/// and its headers) fits (`FUSE_MIN_READ_BUFFER` at least).
pub(super) const READ_BUF: usize = MAX_WRITE as usize + 4096;

/// What a finished `/dev/fuse` session served.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DevStats {
    /// Requests answered, INIT included; forgets and interrupts are not counted (no reply).
    pub requests: u64,
    /// Reader threads.
    pub readers: usize,
    /// The connection ended by an abort (`/dev/fuse` read `ECONNABORTED`: fusectl), not by
    /// the end of the mount (`ENODEV`).
    pub aborted: bool,
}

/// Serves `fs` on the FUSE connection `dev` (a `/dev/fuse` descriptor, mounted, before
/// INIT) until the connection ends: INIT answered by [`UvfsFuse::dispatch`] (without
/// `FUSE_OVER_IO_URING`), then [`FuseOptions::threads`](super::FuseOptions::threads)
/// reader threads, each on its own clone of `dev` but the first, read and serve requests. A request that blocks (one waiting for a FUSE
/// server mounted inside the namespace) can be interrupted: another reader reads its
/// `FUSE_INTERRUPT` (`fuse/serve_intr.rs`). While every reader blocks (with one thread:
/// while its request blocks), nothing is read, interrupts included.
///
/// # Errors
/// Reading or writing `/dev/fuse` fails other than at the connection's end (`ENODEV`,
/// `ECONNABORTED`), or a reader's descriptor or thread cannot be made (the readers made
/// still serve until the connection ends); no INIT arrives.
///
/// # References
/// Linux fs/fuse/dev.c `fuse_dev_do_read`, `fuse_dev_do_write`; libfuse
/// lib/fuse_loop_mt.c, lib/fuse_lowlevel.c `do_init`.
pub fn serve_dev(fs: &Arc<UvfsFuse>, dev: OwnedFd) -> io::Result<DevStats> {
    let dev = Arc::new(dev);
    let mut stats = DevStats {
        requests: serve_until_init(fs, &dev, &mut Vec::new())?,
        ..DevStats::default()
    };
    stats.readers = reader_count(fs);
    let (served, aborted) = dev_readers(fs, &dev, stats.readers)?;
    stats.requests += served;
    stats.aborted = aborted;
    Ok(stats)
}

/// Serves `dev`'s requests on this thread up to INIT, which the kernel sends first (what
/// comes before it, if anything, is answered too); INIT's reply is left in `out`. Returns
/// how many requests were answered.
///
/// # Errors
/// Reading or writing `/dev/fuse` fails; the connection ends before INIT.
pub(super) fn serve_until_init(fs: &UvfsFuse, dev: &OwnedFd, out: &mut Vec<u8>) -> io::Result<u64> {
    let mut buf = vec![0u8; READ_BUF];
    let mut answered = 0;
    loop {
        let Some(n) = read_request(dev, &mut buf)?.ok() else {
            return Err(io::Error::other("the connection ended before INIT"));
        };
        let req = &buf[..n];
        let is_init = abi::InHeader::read_from_prefix(req)
            .is_ok_and(|(h, _)| h.opcode == abi::opcode::FUSE_INIT);
        if fs.dispatch(req, out) {
            write_reply(dev, out)?;
            answered += 1;
        }
        if is_init {
            return Ok(answered);
        }
    }
}

/// How many readers serve `/dev/fuse` when it carries every request: the server's threads
/// (each its own worker, as fuser's session has them). With one, a request that blocks
/// also blocks the reading of its interrupt.
pub(super) fn reader_count(fs: &UvfsFuse) -> usize {
    fs.options().threads.max(1)
}

/// Runs `n` readers of `dev` (this thread and `n - 1` more) until the connection ends;
/// returns the requests answered and whether it ended by an abort.
///
/// # Errors
/// The first reader's error (a read or write failing other than at the connection's end),
/// or a reader thread that cannot be started or panicked; the others still run to the end.
pub(super) fn dev_readers(
    fs: &Arc<UvfsFuse>,
    dev: &Arc<OwnedFd>,
    n: usize,
) -> io::Result<(u64, bool)> {
    let mut threads = Vec::new();
    let mut first_err = None;
    for i in 1..n.max(1) {
        let fs = fs.clone();
        let spawned = clone_dev(dev).and_then(|dev| {
            std::thread::Builder::new()
                .name(format!("uvfs-dev-{i}"))
                .spawn(move || reader(&fs, &dev))
        });
        match spawned {
            Ok(t) => threads.push(t),
            Err(e) => {
                first_err.get_or_insert(e);
                break;
            }
        }
    }
    let mut served = 0;
    let mut aborted = false;
    let mut take = |r: io::Result<(u64, bool)>| match r {
        Ok((s, a)) => {
            served += s;
            aborted |= a;
        }
        Err(e) => {
            first_err.get_or_insert(e);
        }
    };
    take(reader(fs, dev));
    for t in threads {
        take(
            t.join()
                .unwrap_or_else(|_| Err(io::Error::other("a /dev/fuse reader panicked"))),
        );
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok((served, aborted)),
    }
}

/// `FUSE_DEV_IOC_CLONE`: `_IOR(229, 0, uint32_t)` (include/uapi/linux/fuse.h).
const FUSE_DEV_IOC_CLONE: rustix::ioctl::Opcode = rustix::ioctl::opcode::read::<u32>(229, 0);

/// A new descriptor of `dev`'s FUSE connection with a processing queue of its own: a fresh
/// `/dev/fuse` attached with `FUSE_DEV_IOC_CLONE` (fs/fuse/dev.c `fuse_dev_ioctl_clone`).
///
/// # Errors
/// Opening `/dev/fuse` fails; the ioctl's (`EINVAL`: `dev` is no FUSE connection,
/// `EPERM`: the new descriptor is attached already).
fn clone_dev(dev: &OwnedFd) -> io::Result<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let new = rustix::fs::open("/dev/fuse", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())?;
    let src = dev.as_raw_fd() as u32;
    // SAFETY: the opcode is FUSE_DEV_IOC_CLONE, whose argument the kernel reads as a pointer
    // to one `u32`, the descriptor to clone (`get_user(oldfd, (__u32 __user *)arg)`); the
    // `Setter` passes a pointer to `src`, alive for the call.
    unsafe {
        rustix::ioctl::ioctl(
            &new,
            rustix::ioctl::Setter::<FUSE_DEV_IOC_CLONE, u32>::new(src),
        )
    }?;
    Ok(new)
}

/// One reader: reads and serves requests until the connection ends.
fn reader(fs: &UvfsFuse, dev: &OwnedFd) -> io::Result<(u64, bool)> {
    let mut buf = vec![0u8; READ_BUF];
    let mut out = Vec::new();
    let mut served = 0;
    loop {
        match read_request(dev, &mut buf)? {
            Ok(n) => {
                if fs.dispatch(&buf[..n], &mut out) {
                    write_reply(dev, &out)?;
                    served += 1;
                }
            }
            Err(end) => return Ok((served, end == End::Aborted)),
        }
    }
}

/// How a connection ended, as `/dev/fuse` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum End {
    /// `ENODEV`: the mount is gone (its superblock shut the connection down).
    Gone,
    /// `ECONNABORTED`: the connection was aborted (fusectl's `abort`,
    /// `fuse_dev_do_read`).
    Aborted,
}

/// Reads one request: its length, or how the connection ended. `ENOENT` (the request
/// was interrupted before it was read) and `EINTR` are retried.
pub(super) fn read_request(dev: &OwnedFd, buf: &mut [u8]) -> io::Result<Result<usize, End>> {
    loop {
        match rustix::io::read(dev, &mut *buf) {
            Ok(n) => return Ok(Ok(n)),
            Err(rustix::io::Errno::NODEV) => return Ok(Err(End::Gone)),
            Err(rustix::io::Errno::CONNABORTED) => return Ok(Err(End::Aborted)),
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Writes one reply. `ENOENT`: the request is gone (interrupted, or the connection
/// aborted); `ENODEV`, `ECONNABORTED`: the connection is gone (the next read says so).
/// None is an error of the session.
pub(super) fn write_reply(dev: &OwnedFd, out: &[u8]) -> io::Result<()> {
    match rustix::io::write(dev, out) {
        Ok(_)
        | Err(
            rustix::io::Errno::NOENT | rustix::io::Errno::NODEV | rustix::io::Errno::CONNABORTED,
        ) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
