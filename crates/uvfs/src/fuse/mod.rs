//! FUSE: uvfs as a FUSE server ([`server`], behind the `fuse` feature), so that programs
//! use a uvfs namespace through a mount point.

mod handles;
pub mod server;

pub use handles::default_max_handles;
pub use server::{FuseOptions, Permissions, UvfsFuse};
