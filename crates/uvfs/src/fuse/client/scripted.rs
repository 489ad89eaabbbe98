//! A scripted FUSE server for the client's tests: a `SOCK_SEQPACKET` socket pair (the
//! `/dev/fd/N` transport), whose far end a thread serves by calling a test's handler for
//! each request, until the socket is shut down or closed.

use crate::fuse::abi;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use zerocopy::{FromBytes, IntoBytes};

/// What [`spawn`] gives a test: the client's end (for `FuseServer::Socket`) and the
/// server's end.
pub(super) struct Ends {
    pub(super) client: OwnedFd,
    pub(super) server: ServerEnd,
}

/// A clone of the server's end (for notifications); dropping it shuts the socket down,
/// which ends the server thread (the client's connection may outlive the mount).
pub(super) struct ServerEnd(OwnedFd);

impl AsFd for ServerEnd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl Drop for ServerEnd {
    fn drop(&mut self) {
        let _ = rustix::net::shutdown(&self.0, rustix::net::Shutdown::Both);
    }
}

/// Starts the server thread: for each request (at most `bufsize` bytes) it calls
/// `handler(header, payload, send)`, where `send(unique, error, payload)` sends one reply
/// (error 0 or a negative errno). A request the handler does not answer gets no reply
/// (FORGET, DESTROY, or a server that never answers).
pub(super) fn spawn(
    bufsize: usize,
    mut handler: impl FnMut(&abi::InHeader, &[u8], &dyn Fn(u64, i32, &[u8])) + Send + 'static,
) -> Ends {
    let (client, theirs) = rustix::net::socketpair(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )
    .unwrap();
    let server = ServerEnd(theirs.try_clone().unwrap());
    std::thread::spawn(move || {
        let send = |unique: u64, error: i32, payload: &[u8]| {
            let h = abi::OutHeader {
                len: (16 + payload.len()) as u32,
                error,
                unique,
            };
            let mut m = h.as_bytes().to_vec();
            m.extend_from_slice(payload);
            let _ = rustix::net::send(&theirs, &m, rustix::net::SendFlags::NOSIGNAL);
        };
        let mut buf = vec![0u8; bufsize];
        loop {
            let n = match rustix::net::recv(&theirs, &mut buf, rustix::net::RecvFlags::empty()) {
                Ok((0, _)) | Err(_) => return,
                Ok((n, _)) => n,
            };
            let (h, rest) = abi::InHeader::read_from_prefix(&buf[..n]).unwrap();
            handler(&h, rest, &send);
        }
    });
    Ends { client, server }
}

/// The INIT reply of the tests' servers: protocol 7.31, writes up to 64 KiB, the INIT
/// `flags` given.
pub(super) fn init_reply(flags: u32) -> abi::InitOut {
    abi::InitOut {
        major: 7,
        minor: 31,
        max_write: 1 << 16,
        flags,
        ..Default::default()
    }
}
