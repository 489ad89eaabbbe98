//! uvfs as a FUSE client (issue 11, in progress): FUSE servers mounted inside a uvfs
//! namespace, without /dev/fuse or a kernel mount.
//!
//! Built so far: the request lifecycle's interrupt protocol ([`request`]: `request_end`,
//! `queue_interrupt`, the interrupt reader, with a loom model of the 2021 use-after-free);
//! the wire format (`fuse/abi`); a connection ([`conn`]) to a server started as a child
//! over a `SOCK_SEQPACKET` socket pair (`/dev/fd/N`: unmodified libfuse servers) or
//! listening on a Unix stream socket (`hello_ll_uds`), with INIT, a processing table
//! sharded by unique, a reader thread, and abort on server exit. Not yet: interrupts
//! sent from callers (a cancellation API), background and forget queues, notifications,
//! the in-process transport, and the file system behind the seam; nothing here is
//! reachable from the public API yet.

// Wired to the transport next (issue 11); until then only the loom model and the unit
// tests use it.
#[allow(dead_code)]
pub(crate) mod conn;
#[allow(dead_code)]
pub(crate) mod request;

#[cfg(test)]
mod tests;
