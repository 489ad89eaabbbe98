//! FUSE: uvfs as a FUSE server ([`server`], behind the `fuse` feature), so that programs
//! use a uvfs namespace through a mount point.

pub mod server;

pub use server::{FuseOptions, Permissions, UvfsFuse};
