//! `SuperBlock`: one mounted file-system instance: its device number, its rename lock
//! and the file system behind it.
//!
//! Linux analogue: `struct super_block` (include/linux/fs.h, fs/super.c).
//!
//! Nothing here is written on open, close, read or write. What a file system keeps per
//! mount (tmpfs: options, limits, inode numbers) is its own ([`FileSystem`] behind
//! `s_op`; fs/tmpfs/).
//!
//! [`FileSystem`]: crate::fs::FileSystem

use crate::sync::plain::{AtomicU64, Mutex, Ordering};
use std::fmt;

/// Device numbers handed to super blocks (anonymous devices: major 0).
static NEXT_DEV: AtomicU64 = AtomicU64::new(0x30);

/// A mounted file system instance.
pub struct SuperBlock {
    /// Device number (`st_dev`); immutable.
    pub(crate) s_dev: u64,
    /// Serialises cross-directory renames (Linux: `s_vfs_rename_mutex`).
    pub(crate) s_rename_lock: Mutex<()>,
    /// The file system behind this super block (Linux `s_op`, `s_type`, `s_fs_info`);
    /// immutable.
    pub(crate) s_op: Box<dyn crate::fs::FileSystem>,
}

impl fmt::Debug for SuperBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SuperBlock")
            .field("dev", &self.s_dev)
            .field("fs", &self.s_op.name())
            .finish()
    }
}

impl SuperBlock {
    /// A super block for the file system `s_op`, with a fresh device number (`sget` +
    /// `set_anon_super`).
    pub(crate) fn new(s_op: Box<dyn crate::fs::FileSystem>) -> SuperBlock {
        SuperBlock {
            // Relaxed: a unique id, ordered with nothing.
            s_dev: NEXT_DEV.fetch_add(1, Ordering::Relaxed),
            s_rename_lock: Mutex::new(()),
            s_op,
        }
    }

    /// Device number (`st_dev` of every inode here).
    pub fn dev(&self) -> u64 {
        self.s_dev
    }
}
