//! FUSE: uvfs as a FUSE server (`server`, behind the `fuse` feature), so that programs
//! use a uvfs namespace through a mount point; and, in progress, as a FUSE client
//! (`client`), so that FUSE servers can be mounted inside a uvfs namespace.

#[allow(dead_code)] // the client's wire format; used by the transport next (issue 11)
pub(crate) mod abi;
pub mod client;
// The FUSE server's interrupt bookkeeping (loom-checked); outside the `fuse` feature so that
// the loom job, built without it, checks it.
#[cfg(feature = "fuse")]
mod handles;
#[cfg_attr(not(feature = "fuse"), allow(dead_code))]
pub(crate) mod serve_intr;
#[cfg(feature = "fuse")]
pub mod server;

#[cfg(feature = "fuse")]
pub use handles::default_max_handles;
#[cfg(feature = "fuse")]
pub use server::{
    serve_dev, serve_uring, uring_enabled, AbortConn, DevStats, FuseOptions, Permissions, RingsUp,
    UringStats, UvfsFuse, MAX_RETRIES, RING_DEPTH,
};
