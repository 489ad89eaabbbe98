//! `Mount` and `Path`: a mounted tree and a (mount, dentry) position in it.
//!
//! Linux analogue: `struct vfsmount`/`struct mount` (fs/mount.h), `struct path`.
//!
//! uvfs has one mount per namespace for now (no mount points inside it; a descriptor of
//! another namespace is `EXDEV` as a `dirfd`). Dropping the last `Arc<Mount>` (every task of
//! the namespace and the embedder's own) tears the tree down like a forced unmount: every
//! directory is emptied and marked removed, and its entries unhashed, which breaks the
//! parent/child reference cycles (dentry.rs). Files still open keep their data and can be
//! read and written; their directories read as removed (`getdents`: `ENOENT`).

use crate::dentry::Dentry;
use crate::super_block::SuperBlock;
use crate::sync::plain::{AtomicBool, Ordering};
use std::fmt;
use std::sync::Arc;

/// A mounted file system tree.
///
/// # Refcounting
/// `Arc<Mount>`: held by every `Path` (task root and cwd) and by the embedder. Open files do
/// not hold it (a shared count written by every open and close would be a global line on
/// the open/close path); see the module doc for what dropping the last reference does.
pub struct Mount {
    pub(crate) mnt_sb: Arc<SuperBlock>,
    pub(crate) mnt_root: Arc<Dentry>,
    /// The namespace's `fs.protected_hardlinks` (see [`Mount::set_protected_hardlinks`]).
    /// Atomic; written by `set_protected_hardlinks`, read by `linkat`.
    protected_hardlinks: AtomicBool,
}

impl fmt::Debug for Mount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mount").field("sb", &self.mnt_sb).finish()
    }
}

impl Mount {
    /// The super block.
    pub fn super_block(&self) -> &Arc<SuperBlock> {
        &self.mnt_sb
    }

    /// The root dentry.
    pub fn root(&self) -> &Arc<Dentry> {
        &self.mnt_root
    }

    /// Sets this namespace's `fs.protected_hardlinks`: with it on (the default, and most
    /// distributions' setting), `linkat` lets a caller who is neither the file's owner nor
    /// root link only a regular file that is neither set-user-ID nor
    /// set-group-ID-and-group-executable and that it may read and write (`EPERM`
    /// otherwise); off (Linux's built-in default), anyone who may write the new parent
    /// links any file but a directory. Applies to the calls that start after it (as
    /// writing the sysctl does).
    ///
    /// # References
    /// Documentation/admin-guide/sysctl/fs.rst (`protected_hardlinks`); Linux
    /// `may_linkat`, `safe_hardlink_source`.
    pub fn set_protected_hardlinks(&self, on: bool) {
        // Relaxed: an independent setting, as Linux's plain read of the sysctl in
        // `may_linkat`; it orders no other memory.
        self.protected_hardlinks.store(on, Ordering::Relaxed);
    }

    /// This namespace's `fs.protected_hardlinks` (see
    /// [`set_protected_hardlinks`](Self::set_protected_hardlinks)).
    pub fn protected_hardlinks(&self) -> bool {
        // Relaxed: see `set_protected_hardlinks`.
        self.protected_hardlinks.load(Ordering::Relaxed)
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        // Iterative teardown: empty every directory reachable from the root.
        let mut stack = vec![self.mnt_root.clone()];
        while let Some(d) = stack.pop() {
            if let Some(dir) = d.d_inode.dir() {
                let mut l = dir.lock();
                l.inner.dead = true;
                let children = l.clear();
                drop(l);
                for c in &children {
                    crate::namei::unhash(c);
                }
                stack.extend(children);
            }
        }
    }
}

impl Mount {
    /// A mount of super block `sb` with root directory `root` (inode of `sb`): what a file
    /// system's `mount` returns (Linux `vfs_create_mount` after `fill_super`).
    pub(crate) fn with_root(sb: Arc<SuperBlock>, root: Arc<crate::inode::Inode>) -> Arc<Mount> {
        let root = Arc::new(Dentry::new(root, None, Arc::from(&b"/"[..]), 0));
        Arc::new(Mount {
            mnt_sb: sb,
            mnt_root: root,
            protected_hardlinks: AtomicBool::new(true),
        })
    }
}

/// A position in the namespace: a mount and a dentry in it (`struct path`).
#[derive(Clone, Debug)]
pub struct Path {
    /// The mount.
    pub mnt: Arc<Mount>,
    /// The dentry.
    pub dentry: Arc<Dentry>,
}
