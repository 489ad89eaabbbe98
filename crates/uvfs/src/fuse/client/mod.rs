//! uvfs as a FUSE client (issue 11, in progress): FUSE servers mounted inside a uvfs
//! namespace, without /dev/fuse or a kernel mount ([`mount`]).
//!
//! Built so far: the request lifecycle's interrupt protocol (`request`: `request_end`,
//! `queue_interrupt`, the interrupt reader, with a loom model of the 2021 use-after-free);
//! the wire format (`fuse/abi`); a connection (`conn`) to a server started as a child
//! over a `SOCK_SEQPACKET` socket pair (`/dev/fd/N`: unmodified libfuse servers), listening
//! on a Unix stream socket (`hello_ll_uds`), or in this process on the other end of a socket
//! handed over ([`FuseServer::Socket`], e.g. a fuser `Session::from_fd`), with INIT, a processing table
//! sharded by unique, callers that receive their own replies (`leader`: leader/follower, a reader
//! thread when no caller waits), and abort on server exit; the file system behind
//! the seam ([`fs`]: lookup counts and FORGET, entry and attribute timeouts, the data,
//! directory and attribute requests, notifications), interrupts from callers
//! ([`Interrupter`]), READDIRPLUS (listings that prime the dentry cache). Background
//! requests are capped at `max_background`
//! and FORGETs go in batches (`conn`).
//!
//! # No request is sent pinned
//! A request sent while the calling thread is pinned in the epoch that frees uvfs's
//! retired objects (`crate::sync::epoch`) would hold back, until answered, every free of
//! the process on any mount: with a server that never answers, memory would grow with
//! every later unlink, close and rename anywhere. (Measured 2026-12-07, before the walks
//! left their pin: with one `stat` blocked on a server that never answered a LOOKUP, ten
//! files created, closed and unlinked on a separate tmpfs mount were still allocated 3 s
//! later.) A path walk's LOOKUP, GETATTR (a directory's stale attributes before its
//! search check) and READLINK are sent after the walk left its pin (`namei::Unlazy`,
//! Linux's `unlazy_walk`); the request of the call after the walk (GETATTR, STATX,
//! SETATTR, STATFS, ACCESS, MKDIR, MKNOD, SYMLINK, UNLINK, RMDIR, LINK, RENAME, the xattr
//! calls, and the CREATE of `open(O_CREAT)`) unpinned, the dentry or parents counted
//! (`Task::with_dentry`, `Task::with_parent`, rename's `rename_leaving`, open's
//! `create_after_walk`); tests: `unlazy_tests`. OPEN and READ were never sent pinned. A
//! server that stops answering still holds its caller: mount one that may with
//! [`FuseClientOptions::request_timeout`] (the connection aborts after it, the waiting
//! call fails with `ECONNABORTED`).

// The page cache's store (the policy is in `fs`).
mod cache;
pub(crate) mod conn;
pub mod fs;
#[doc(hidden)]
pub mod fuzz;
pub(crate) mod interrupt;
// Leader/follower receive: callers read their own replies (loom-checked).
pub(crate) mod leader;
// The request lifecycle and the interrupt protocol (loom-checked), used by `conn` and by
// `Interrupter`.
pub(crate) mod request;

pub use fs::{
    conn_errors, mount, server_ended, FuseClientOptions, FuseServer, RequestEnd,
    DEFAULT_CACHE_PAGES, DEFAULT_RECEIVE_SPIN, SPIN_BACKOFF,
};
pub use interrupt::Interrupter;

#[cfg(all(test, not(uvfs_loom)))]
mod estale_tests;
// The loom model of the page cache's protocol (cache.rs).
#[cfg(all(test, uvfs_loom))]
mod loom_cache;
// The loom model of the leader/follower receive (leader.rs).
#[cfg(all(test, uvfs_loom))]
mod loom_leader;
#[cfg(all(test, not(uvfs_loom)))]
mod permission_tests;
#[cfg(all(test, not(uvfs_loom)))]
mod readdirplus_tests;
#[cfg(all(test, not(uvfs_loom)))]
mod scripted;
#[cfg(test)]
mod tests;
#[cfg(all(test, not(uvfs_loom)))]
mod unlazy_tests;
