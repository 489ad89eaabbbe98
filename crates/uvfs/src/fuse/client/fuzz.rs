//! Fuzzing entry points over what the FUSE client takes from a server (hidden; for the
//! cargo-fuzz targets in `fuzz/` and `tests/fuzz_regressions.rs`): [`parse`] runs the wire
//! parsers on one message, [`session`] mounts the client over an in-process server whose
//! replies are the fuzzer's bytes.
//!
//! Linux analogue: none in the kernel; syzkaller's `syz_fuse_handle_req` plays the same
//! hostile server against fs/fuse/dev.c.
//!
//! Invariants: neither function panics, blocks for good or allocates beyond what its input
//! asks for, whatever the bytes; a panic or a hang here is a bug of the client (for the
//! "server stalled" panic of [`session`]: a caller waiting on a request the server already
//! answered, or a connection the client never closes).

use super::{mount, FuseClientOptions, FuseServer};
use crate::fuse::abi::{self, opcode, InHeader, InitOut, OutHeader};
use crate::{AtFlags, Fd, MountFlags, OpenFlags, RenameFlags, Task};
use rustix::fd::OwnedFd;
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};
use std::time::Duration;
use zerocopy::{FromBytes, IntoBytes};

/// Runs every parser the client applies to a server's message on `data`: the message
/// check (`abi::parse_message`), then, on a reply's payload, each reply type the client
/// reads (`abi::exact`) and the READDIR records (`abi::dirents`); on a notification's,
/// its record as the client reads it. The results are dropped.
pub fn parse(data: &[u8]) {
    match abi::parse_message(data) {
        Ok(abi::Message::Reply {
            result: Ok(p),
            unique: _,
        }) => {
            let _ = abi::exact::<abi::EntryOut>(p);
            let _ = abi::exact::<abi::AttrOut>(p);
            let _ = abi::exact::<abi::OpenOut>(p);
            let _ = abi::exact::<abi::WriteOut>(p);
            let _ = abi::exact::<abi::StatfsOut>(p);
            let _ = abi::exact::<abi::LseekOut>(p);
            let _ = abi::exact::<abi::GetxattrOut>(p);
            let _ = abi::exact::<abi::InitOut>(p);
            let _ = abi::dirents(p);
            let _ = abi::direntplus(p);
        }
        Ok(abi::Message::Notify { code: _, payload }) => {
            let _ = abi::NotifyInvalInodeOut::read_from_prefix(payload);
            let _ = abi::NotifyInvalEntryOut::read_from_prefix(payload);
            let _ = abi::NotifyDeleteOut::read_from_prefix(payload);
        }
        Ok(abi::Message::Reply { result: Err(_), .. }) | Err(_) => {}
    }
}

/// Bit 15 of a chunk's prefix: write the unique of the request being answered into the
/// header (bytes 8..16).
pub const PATCH_UNIQUE: u16 = 1 << 15;
/// Bit 14 of a chunk's prefix: write the chunk's length into the header (bytes 0..4).
pub const PATCH_LEN: u16 = 1 << 14;
/// The low 14 bits of a chunk's prefix: its length (cut to what `data` has left).
pub const CHUNK_LEN: u16 = (1 << 14) - 1;
/// Bit 0 of `data[0]`, the mode byte of [`session`]: INIT is answered with the first chunk
/// instead of a valid reply.
pub const MODE_RAW_INIT: u8 = 1;

/// How long the server waits for a request when it has answered everything the client
/// waits for; past it the client is stuck on a reply it will never get (a bug): the server
/// closes the socket, which aborts the connection, and [`session`] panics.
const STALL: Duration = Duration::from_secs(5);

/// The script's `dirfd`: its paths are absolute, under the mount at `/mnt`.
const CWD: Fd = Fd::AT_FDCWD;

/// Mounts the FUSE client over an in-process hostile server whose replies come from
/// `data`, runs a fixed script of calls on it, and unmounts; the calls' results are
/// dropped.
///
/// `data` is a mode byte ([`MODE_RAW_INIT`]) and chunks, each a little-endian `u16`
/// prefix (flags [`PATCH_UNIQUE`], [`PATCH_LEN`]; length [`CHUNK_LEN`]) and that many
/// bytes. The server answers INIT (with a valid 7.38 reply, or with the first chunk), then
/// sends one chunk as one packet for each message it receives, and also whenever the
/// client waits for a reply the chunks sent so far did not give (so an unanswered request
/// does not stop the session: the next chunk goes out). When the chunks run out, it closes
/// its end, which aborts the connection: what is in flight fails with `ECONNABORTED`, what
/// comes later with `ENOTCONN`. A chunk's header is patched only where the flags say:
/// random bytes seldom name a request in flight. After the script the client's task and
/// mount are dropped; their teardown (FORGETs, DESTROY, the close of the client's end)
/// may wait for an epoch grace period, which `session` then waits for, as a program's
/// later calls would make one pass.
///
/// The script (as a program on a FUSE mount would): `stat` of the root and of `f`, `open`
/// `f` with `O_CREAT`, `write`, `pread`, `lseek(SEEK_DATA)`, `ftruncate`, `fsync`,
/// `close`; `getdents64` of the root (twice); `mkdir d`, `rename f d/g`, `unlink d/g`,
/// `rmdir d`, `symlink`, `readlink`, `statfs`.
///
/// With `UVFS_FUZZ_TRACE` set, the server prints each request's opcode and unique and
/// each packet it sends (to stderr), for reading a crash's input.
///
/// # Panics
/// Only on a bug: what the client panics with, or "server stalled" (no request for 5 s
/// while none is left unanswered: the client waits on a reply it already got).
pub fn session(data: &[u8]) {
    let Ok((client, server)) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    ) else {
        return;
    };
    let script = data.to_vec();
    let Ok(h) = std::thread::Builder::new()
        .name("uvfs-fuzz-server".into())
        .spawn(move || serve(server, &script))
    else {
        return;
    };
    run_client(client);
    // The namespace's dentries (and through them the FUSE inodes, the mount and the
    // connection) may be freed only after a grace period (the dcache's children are
    // epoch-reclaimed): until then the client's end stays open and a server with chunks
    // left waits for its end. Grace periods, while the server has not finished.
    for _ in 0..100 {
        if h.is_finished() {
            break;
        }
        crate::sync::rcu::synchronize();
        std::thread::sleep(Duration::from_millis(1));
    }
    match h.join() {
        Err(p) => std::panic::resume_unwind(p),
        Ok(Outcome::Done) => {}
        Ok(Outcome::Stalled(op)) => panic!(
            "server stalled: no request for 5 s while none was unanswered, yet the client \
             did not finish (last request: opcode {op})"
        ),
    }
}

/// How the server's loop ended.
enum Outcome {
    /// The chunks ran out or the client closed its end.
    Done,
    /// No request came for [`STALL`] while none was left unanswered: the client waits on
    /// something the server cannot see (the last opcode received).
    Stalled(u32),
}

/// The client: the mount and the script of [`session`].
fn run_client(sock: OwnedFd) {
    let Ok(m) = mount(FuseServer::Socket(sock), FuseClientOptions::default()) else {
        return;
    };
    let task = Task::init(&crate::mount(Default::default()));
    if task.mkdirat(CWD, "/mnt", 0o755).is_err()
        || task.mount(&m, "/mnt", MountFlags::empty()).is_err()
    {
        return;
    }
    drop(m);
    let _ = task.fstatat(CWD, "/mnt", AtFlags::empty());
    let _ = task.fstatat(CWD, "/mnt/f", AtFlags::empty());
    if let Ok(fd) = task.open("/mnt/f", OpenFlags::RDWR | OpenFlags::CREAT, 0o644) {
        let _ = task.write(fd, b"hello");
        let mut buf = [0u8; 64];
        let _ = task.pread(fd, &mut buf, 0);
        // SEEK_DATA.
        let _ = task.lseek(fd, 0, 3);
        let _ = task.ftruncate(fd, 3);
        let _ = task.fsync(fd);
        let _ = task.close(fd);
    }
    if let Ok(fd) = task.open("/mnt", OpenFlags::RDONLY | OpenFlags::DIRECTORY, 0) {
        let mut buf = [0u8; 4096];
        let _ = task.getdents64(fd, &mut buf);
        let _ = task.getdents64(fd, &mut buf);
        let _ = task.close(fd);
    }
    let _ = task.mkdirat(CWD, "/mnt/d", 0o755);
    let _ = task.renameat2(CWD, "/mnt/f", CWD, "/mnt/d/g", RenameFlags::empty());
    let _ = task.unlinkat(CWD, "/mnt/d/g", AtFlags::empty());
    let _ = task.unlinkat(CWD, "/mnt/d", AtFlags::REMOVEDIR);
    let _ = task.symlinkat("f", CWD, "/mnt/l");
    let mut buf = [0u8; 256];
    let _ = task.readlinkat(CWD, "/mnt/l", &mut buf);
    let _ = task.statfs("/mnt");
    // The task's namespace, the mount and with them the connection go here (or after a
    // grace period, see `session`): FORGETs, DESTROY, then the client's end closes.
    drop(task);
}

/// The fuzzer's chunks, in order.
struct Chunks<'a>(&'a [u8]);

impl Chunks<'_> {
    /// The next chunk and its flags; `None` once `data` is used up.
    fn next(&mut self) -> Option<(u16, &[u8])> {
        let (p, rest) = self.0.split_first_chunk::<2>()?;
        let prefix = u16::from_le_bytes(*p);
        let n = usize::from(prefix & CHUNK_LEN).min(rest.len());
        let (chunk, rest) = rest.split_at(n);
        self.0 = rest;
        Some((prefix, chunk))
    }
}

/// Chunk `c` (prefix flags `flags`) as the message to send, answering `unique`.
fn patched(flags: u16, c: &[u8], unique: u64) -> Vec<u8> {
    let mut m = c.to_vec();
    if flags & PATCH_LEN != 0 && m.len() >= 4 {
        let len = m.len() as u32;
        m[..4].copy_from_slice(&len.to_ne_bytes());
    }
    if flags & PATCH_UNIQUE != 0 && m.len() >= 16 {
        m[8..16].copy_from_slice(&unique.to_ne_bytes());
    }
    m
}

/// Whether the client waits for the answer to `op` (everything but the one-way messages
/// and the background RELEASEs).
fn waited(op: u32) -> bool {
    !matches!(
        op,
        opcode::FUSE_FORGET
            | opcode::FUSE_BATCH_FORGET
            | opcode::FUSE_INTERRUPT
            | opcode::FUSE_DESTROY
            | opcode::FUSE_RELEASE
            | opcode::FUSE_RELEASEDIR
    )
}

/// One packet from the client: `Ok(Some(header))`, `Ok(None)` at its end (closed); the
/// socket's error otherwise (`EAGAIN`: nothing, with `DONTWAIT`, or nothing within
/// [`STALL`]). A packet too short for a header reads as a header of zeroes.
fn recv_req(
    sock: &OwnedFd,
    buf: &mut [u8],
    flags: RecvFlags,
) -> rustix::io::Result<Option<InHeader>> {
    loop {
        match rustix::net::recv(sock, &mut *buf, flags) {
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e),
            Ok((_, 0)) => return Ok(None),
            Ok((n, _)) => {
                let h = InHeader::read_from_prefix(&buf[..n])
                    .map_or_else(|_| Default::default(), |(h, _)| h);
                return Ok(Some(h));
            }
        }
    }
}

/// Sends `m` as one packet, not waiting for room (a client that stopped reading must not
/// hold the server: the packet is dropped then); whether it went out.
fn send_pkt(sock: &OwnedFd, m: &[u8]) -> bool {
    rustix::net::send(sock, m, SendFlags::NOSIGNAL | SendFlags::DONTWAIT).is_ok()
}

/// The hostile server of [`session`].
fn serve(sock: OwnedFd, data: &[u8]) -> Outcome {
    let _ = rustix::net::sockopt::set_socket_timeout(
        &sock,
        rustix::net::sockopt::Timeout::Recv,
        Some(STALL),
    );
    // Requests are small (the script writes 5 bytes); a longer one is cut (`TRUNC` not
    // asked for: only its header matters).
    let mut buf = vec![0u8; 64 << 10];
    let (mode, rest) = data.split_first().map_or((0, &[][..]), |(m, r)| (*m, r));
    let mut chunks = Chunks(rest);
    // INIT: the client's first message.
    let init = match recv_req(&sock, &mut buf, RecvFlags::empty()) {
        Ok(Some(h)) => h,
        Ok(None) | Err(_) => return Outcome::Done,
    };
    if mode & MODE_RAW_INIT != 0 {
        let Some((flags, c)) = chunks.next() else {
            return Outcome::Done;
        };
        let _ = send_pkt(&sock, &patched(flags, c, init.unique));
    } else {
        let out = InitOut {
            major: abi::FUSE_KERNEL_VERSION,
            minor: abi::FUSE_KERNEL_MINOR_VERSION,
            max_readahead: 128 << 10,
            flags: 0,
            max_write: 128 << 10,
            time_gran: 1,
            max_pages: 32,
            ..Default::default()
        };
        let h = OutHeader {
            len: (std::mem::size_of::<OutHeader>() + std::mem::size_of::<InitOut>()) as u32,
            error: 0,
            unique: init.unique,
        };
        let mut m = h.as_bytes().to_vec();
        m.extend_from_slice(out.as_bytes());
        let _ = send_pkt(&sock, &m);
    }
    // Uniques of requests received that the client waits on and no chunk answered (one at
    // a time from the script's single thread; a few in a hostile order).
    let mut pending: Vec<u64> = Vec::new();
    let mut last_op = opcode::FUSE_INIT;
    let trace = std::env::var_os("UVFS_FUZZ_TRACE").is_some();
    loop {
        let flags = if pending.is_empty() {
            RecvFlags::empty()
        } else {
            RecvFlags::DONTWAIT
        };
        let unique = match recv_req(&sock, &mut buf, flags) {
            Ok(Some(h)) => {
                if trace {
                    eprintln!("uvfs-fuzz-server: opcode {} unique {}", h.opcode, h.unique);
                }
                last_op = h.opcode;
                if waited(h.opcode) {
                    pending.push(h.unique);
                }
                h.unique
            }
            Ok(None) => return Outcome::Done,
            // Nothing new, and the client waits: the next chunk answers its latest request.
            Err(rustix::io::Errno::AGAIN) if !pending.is_empty() => {
                pending.last().copied().unwrap_or_default()
            }
            Err(rustix::io::Errno::AGAIN) => return Outcome::Stalled(last_op),
            Err(_) => return Outcome::Done,
        };
        let Some((flags, c)) = chunks.next() else {
            // Out of chunks: closing our end aborts the connection.
            return Outcome::Done;
        };
        let m = patched(flags, c, unique);
        if trace {
            eprintln!("uvfs-fuzz-server: sends {m:02x?}");
        }
        if !send_pkt(&sock, &m) {
            // Not delivered: nothing changes for the client.
            continue;
        }
        if m.is_empty() {
            // An empty packet reads as the end of the connection: the client aborts,
            // failing what it waits for.
            pending.clear();
        } else if let Ok((h, _)) = OutHeader::read_from_prefix(&m) {
            // Whatever carries a header naming a request in flight completes it (the
            // reply, or `EIO` for a malformed one): `conn.rs` `dispatch`.
            pending.retain(|&u| u != h.unique);
        }
    }
}
