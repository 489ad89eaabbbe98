//! `SuperBlock`: one mounted file-system instance: its device number, its rename lock
//! and the file system behind it.
//!
//! Linux analogue: `struct super_block` (include/linux/fs.h, fs/super.c).
//!
//! Nothing here is written on open, close, read or write. The super block lives as long as
//! one of its mounts (each holds it), and tears its dentry tree down when the last goes. What a file system keeps per
//! mount (tmpfs: options, limits, inode numbers) is its own ([`FileSystem`] behind
//! `s_op`; fs/tmpfs/).
//!
//! [`FileSystem`]: crate::fs::FileSystem

use crate::dentry::Dentry;
use crate::sync::plain::{AtomicU64, Mutex, Ordering};
use std::fmt;
use std::sync::Arc;

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
    /// The root dentry (`s_root`), set once when the first mount is made. Dropping the
    /// super block (its last mount is gone) tears the tree down from here.
    s_root: std::sync::OnceLock<Arc<Dentry>>,
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
            s_root: std::sync::OnceLock::new(),
        }
    }

    /// Records the root dentry (`d_make_root` in `fill_super`). Context: once per super
    /// block (`Mount::with_root`); a second root would never be torn down (its hold on
    /// itself for its children, dentry.rs `ParentLink`, goes only at `SuperBlock::drop`), so
    /// it is refused loudly: a bug in uvfs, never a result of input.
    pub(crate) fn set_root(&self, root: &Arc<Dentry>) {
        assert!(
            self.s_root.set(root.clone()).is_ok(),
            "a super block has one root"
        );
    }

    /// Device number (`st_dev` of every inode here).
    pub fn dev(&self) -> u64 {
        self.s_dev
    }
}

impl Drop for SuperBlock {
    /// `kill_sb` after the last mount: tears the tree down like a forced unmount. Every
    /// directory is emptied and marked removed, and its entries unhashed, which breaks the
    /// parent/child reference cycles (dentry.rs). Files still open keep their data and can
    /// be read and written; their directories read as removed (`getdents`: `ENOENT`).
    fn drop(&mut self) {
        let Some(root) = self.s_root.take() else {
            return;
        };
        // Iterative teardown: empty every directory reachable from the root.
        if let Some(dir) = root.dir() {
            let mut l = dir.lock_all();
            l.set_dead();
            let children = l.clear();
            // Marked under the lock they left under (see `dentry::unhash`).
            children.iter().for_each(crate::dentry::unhash);
            drop(l);
            crate::dentry::shrink_children(children, true);
        }
        // The root leaves no parent's index, so nothing else unhashes it: marked here, its
        // children's count is detached (once: `unhash`'s swap), and its hold on itself goes
        // when no link to it is left.
        crate::dentry::unhash(&root);
    }
}
