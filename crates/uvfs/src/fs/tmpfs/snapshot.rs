//! Snapshots: a new tmpfs whose tree is a copy of a tmpfs directory's subtree, built in
//! the dentry cache directly, with every regular file's pages shared copy-on-write.
//!
//! What a snapshot keeps and how consistent it is: [`snapshot`]'s documentation.

use super::{Contents, Limits, Tmpfs, TmpfsInode, Xattrs};
use crate::dcache::{EOD_COOKIE, FIRST_COOKIE};
use crate::dentry::Dentry;
use crate::fs::NewInode;
use crate::inode::Inode;
use crate::mount::Mount;
use crate::super_block::SuperBlock;
use crate::sync::plain::{Mutex, Ordering};
use crate::sync::plock;
use crate::types::S_IFDIR;
use crate::{Errno, Result};
use std::collections::HashMap;
use std::sync::Arc;

/// A snapshot of the whole tmpfs mounted as `mnt` (from its root, which for a bind
/// mount is the bound directory): a new, unattached tmpfs mount holding a copy of the
/// tree whose file pages are shared copy-on-write with the source. Give it to
/// [`Task::init`](crate::Task::init) or mount it in a namespace; the source is not
/// changed and both sides stay independent.
///
/// Shapes: time and memory per inode and per page of file data (a page the first
/// snapshot shares costs one 32-byte allocation), none per byte.
///
/// Linux has no tmpfs snapshot; the semantics are a `cp -a --reflink=always` of the
/// subtree into a fresh tmpfs (btrfs `subvolume snapshot`, XFS reflink, `FICLONE`): a
/// snapshot is an independent file system (its own device number, mount and limits); it
/// and the source share file pages until either side changes one, which then copies that
/// page for itself (regular.rs, `Page::Shared`). The cost is per inode and per page (one
/// small allocation and one reference-count increment for a page shared the first time),
/// not per byte: no file data is copied.
///
/// What is kept: the tree (names, and `getdents` order), types, permission bits, owners,
/// the three times and the creation time, device numbers of device nodes, symlink
/// targets, extended attributes, file sizes and holes, hard links within the subtree (one
/// inode, its link count the names the snapshot holds) and inode numbers (as a btrfs
/// snapshot: same numbers, another `st_dev`; the snapshot's root is inode 1, as a fresh
/// tmpfs's). The snapshot has the source mount's options (`size=`, `nr_inodes=`) and is
/// charged, in its own accounting, for every inode and page it holds, as a copy would be:
/// its `statfs` and its `ENOSPC` are those of a copy, only the memory behind shared pages
/// is not spent twice.
///
/// What is not: mounts inside the subtree (a snapshot copies one file system; a mount
/// point shows the directory under it, as a bind mount's source does); files unlinked
/// but still open (they have no name). Consistency: each file's pages and size are taken
/// at one instant (under its data lock) and each directory's entries at one instant
/// (under its lock), but the tree is not frozen as a whole: a concurrent rename across
/// directories may be seen in neither place or, for a file, in both (then as two names of
/// one inode; a directory is copied once, where the walk met it first), as `cp -a` of a
/// changing tree. Inode numbers stay unique: new files of the snapshot are numbered above
/// every copied number and every number the source had handed out.
/// Permissions are not checked: this is an operation of the program embedding uvfs (as
/// [`mount`](super::mount) is), not a syscall of a task.
///
/// # Errors
/// `EOPNOTSUPP` when `mnt` is not a tmpfs (hostfs: the host has the data; copy it with
/// [`Dir::import_host`](crate::Dir::import_host)). `ENOSPC` cannot happen: the snapshot
/// has the source's limits and holds no more than the source does, except when the
/// source changed during the snapshot and has more than its own limit allows (then
/// nothing is returned).
///
/// # Example
/// ```
/// use uvfs::{tmpfs, Task};
/// let fixture = tmpfs::mount(Default::default());
/// Task::init(&fixture).root_dir()?.write("config", "v1")?;
/// let copy = tmpfs::snapshot(&fixture)?;
/// let t = Task::init(&copy);
/// t.root_dir()?.write("config", "v2")?;
/// assert_eq!(Task::init(&fixture).root_dir()?.read_to_string("config")?, "v1");
/// assert_eq!(t.root_dir()?.read_to_string("config")?, "v2");
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # References
/// btrfs `subvolume snapshot`; `ioctl_ficlone(2)`; `cp --reflink=always`.
pub fn snapshot(mnt: &Mount) -> Result<Arc<Mount>> {
    snapshot_at(mnt, mnt.root())
}

/// [`snapshot`] of the subtree of directory `dir` (a dentry of `mnt`'s super block): the
/// new mount's root is a copy of `dir` (its mode, owner and times).
///
/// # Errors
/// `ENOTDIR` when `dir` is not a directory; `ENOENT` when it was removed;
/// `EOPNOTSUPP` and `ENOSPC` as [`snapshot`].
pub(crate) fn snapshot_at(mnt: &Mount, dir: &Arc<Dentry>) -> Result<Arc<Mount>> {
    let src_sb = mnt.super_block();
    let Some(src_fs) = src_sb.s_op.as_any().downcast_ref::<Tmpfs>() else {
        return Err(Errno::EOPNOTSUPP);
    };
    let Some(src_dir) = dir.dir() else {
        return Err(Errno::ENOTDIR);
    };
    if src_dir.lock_all().dead() {
        return Err(Errno::ENOENT);
    }
    let fs = Tmpfs::new(src_fs.opts.clone());
    let limits = fs.limits.clone();
    let sb = Arc::new(SuperBlock::new(Box::new(fs)));
    let mut b = Builder {
        dev: sb.s_dev,
        acct: limits,
        links: HashMap::new(),
        dirs: HashMap::from([(Arc::as_ptr(dir.inode()), dir.inode().clone())]),
        max_ino: 1,
    };
    let root = b.copy_inode(dir.inode(), 1)?;
    let mnt = Mount::with_root(sb.clone(), Arc::new(root));
    // Depth first, one directory's entries at a time (no recursion: a deep tree must not
    // overflow the stack).
    let mut todo = vec![(dir.clone(), mnt.root().clone())];
    while let Some((src, dst)) = todo.pop() {
        let (Some(sdir), Some(ddir)) = (src.dir(), dst.dir()) else {
            unreachable!("both are directories")
        };
        // The entries in `getdents` order with their names, as the directory held them at
        // one instant: under its lock, which a rename of any of them would need too.
        let entries: Vec<(crate::dcache::Name, Arc<Dentry>)> = {
            let l = sdir.lock_all();
            let g = crate::sync::epoch::pin();
            let v = l.listing(FIRST_COOKIE, EOD_COOKIE);
            v.map(|(_, d)| (d.link(&g).name.clone(), d.clone()))
                .collect()
        };
        let mut subdirs = 0u32;
        let mut dl = ddir.lock_all();
        for (name, child) in entries {
            let inode = child.inode();
            let new = if inode.is_dir() {
                // A directory moved during the walk into one copied later is met twice:
                // copied once, where the walk met it first (its number must stay unique).
                if b.dirs.insert(Arc::as_ptr(inode), inode.clone()).is_some() {
                    continue;
                }
                Arc::new(b.copy_inode(inode, inode.i_ino)?)
            } else {
                b.link_or_copy(inode)?
            };
            let cookie = dl.next_cookie(&name)?;
            let d = Dentry::new_arc(new, Some(&dst), name.clone(), cookie);
            let replaced = dl.insert(name, d.clone(), cookie);
            // Names are unique in one listing taken under the lock; a replacement would
            // leave the counts above one too high, so it is a bug, not input.
            debug_assert!(replaced.is_none(), "a name twice in one listing");
            if d.dir().is_some() {
                subdirs += 1;
                todo.push((child, d));
            }
        }
        drop(dl);
        // `.`, its name in the parent, and each subdirectory's `..`.
        // Relaxed: not yet published (the mount is returned at the end).
        dst.inode().i_nlink.store(2 + subdirs, Ordering::Relaxed);
    }
    for l in b.links.into_values() {
        // Relaxed: as above.
        l.copy.i_nlink.store(l.names, Ordering::Relaxed);
    }
    // New files of the snapshot take numbers above every copied one and above every
    // number the source had handed out when the walk ended (a file created in the source
    // during the walk, in a directory copied later, has one from a batch taken after the
    // walk began). Relaxed: only uniqueness matters; the copies' numbers are known here.
    let next = src_fs.next_ino.load(Ordering::Relaxed).max(b.max_ino + 1);
    let Some(fs) = sb.s_op.as_any().downcast_ref::<Tmpfs>() else {
        unreachable!("built as a tmpfs above")
    };
    // Relaxed: not yet published.
    fs.next_ino.store(next, Ordering::Relaxed);
    Ok(mnt)
}

/// A non-directory copied: its source (held), its copy, the names the copy has.
struct Linked {
    _src: Arc<Inode>,
    copy: Arc<Inode>,
    names: u32,
}

/// The state of one snapshot being built.
struct Builder {
    /// The new super block's device number.
    dev: u64,
    /// The new mount's accounting, if it has limits.
    acct: Option<Arc<Limits>>,
    /// Non-directories copied so far, by source inode address: the source (held, so that
    /// its address cannot be reused by another inode during the walk), the copy, and the
    /// names it has in the snapshot (a hard link's later names link the same copy).
    links: HashMap<*const Inode, Linked>,
    /// Directories copied so far, by source inode address (held, as `links`).
    dirs: HashMap<*const Inode, Arc<Inode>>,
    /// The largest inode number copied.
    max_ino: u64,
}

impl Builder {
    /// The copy of non-directory `src` for one more name: the one made for an earlier
    /// name of the same inode, or a new one.
    fn link_or_copy(&mut self, src: &Arc<Inode>) -> Result<Arc<Inode>> {
        if let Some(Linked { copy, names, .. }) = self.links.get_mut(&Arc::as_ptr(src)) {
            // Every name past the first takes an inode of `nr_inodes` (`shmem_link`).
            if let Some(a) = &self.acct {
                a.reserve_inode()?;
            }
            *names += 1;
            return Ok(copy.clone());
        }
        let copy = Arc::new(self.copy_inode(src, src.i_ino)?);
        let l = Linked {
            _src: src.clone(),
            copy: copy.clone(),
            names: 1,
        };
        self.links.insert(Arc::as_ptr(src), l);
        Ok(copy)
    }

    /// A copy of tmpfs inode `src` numbered `ino`, charged to the new mount's limits:
    /// its attributes, its symlink target or its pages (shared), its extended
    /// attributes. Link count: 1 (2 for a directory) until the caller sets it.
    ///
    /// # Errors
    /// `EOPNOTSUPP` when `src` is not a tmpfs inode; `ENOSPC` when the limits cannot hold
    /// it (nothing is charged then: the partial copy's `Drop` gives back what it held).
    fn copy_inode(&mut self, src: &Inode, ino: u64) -> Result<Inode> {
        self.max_ino = self.max_ino.max(ino);
        let Some(t) = src.i_op.as_any().downcast_ref::<TmpfsInode>() else {
            return Err(Errno::EOPNOTSUPP);
        };
        let (contents, size, pages) = match &t.contents {
            Contents::Reg(d) => {
                let (data, size) = super::regular::share_pages(d, src);
                let n = data.page_count();
                (Contents::Reg(super::regular::RegFile::new(data)), size, n)
            }
            Contents::Symlink(target) => (
                Contents::Symlink(target.clone()),
                target.len() as u64,
                // Relaxed: a symlink's blocks never change after creation.
                src.i_blocks.load(Ordering::Relaxed) / super::BLOCKS_PER_PAGE,
            ),
            Contents::None => (Contents::None, 0, 0),
        };
        let xattrs: Xattrs = plock(&t.xattrs).clone();
        let nosec = !xattrs.keys().any(|n| n.starts_with(b"security."));
        // As `new_inode` and `setxattr` charge them, all before anything is built.
        let ispace = match &self.acct {
            Some(a) if a.limits_inodes() => {
                xattrs.iter().map(|(n, v)| super::xattr_space(n, v)).sum()
            }
            _ => 0,
        };
        super::charge(self.acct.as_ref(), pages, ispace)?;
        let t = TmpfsInode {
            acct: self.acct.clone(),
            contents,
            xattrs: Mutex::new(xattrs),
        };
        let args = NewInode {
            mode: src.mode(),
            uid: 0,
            gid: 0,
            rdev: 0,
            target: None,
            now: src.i_btime,
            open: crate::types::OpenFlags::empty(),
        };
        let mut inode = super::assemble(ino, self.dev, args, t, size, pages);
        if nosec {
            inode.set_nosec();
        }
        // Owner, times, btime and rdev are the source's.
        inode.copy_attrs_from(src);
        debug_assert_eq!(inode.mode() & crate::types::S_IFMT == S_IFDIR, src.is_dir());
        Ok(inode)
    }
}

#[cfg(test)]
mod tests {
    use super::super::TmpfsInode;
    use crate::{Fd, OpenFlags, Task};

    /// `(index, shared, address)` of the pages of the file `t` has open as `fd`.
    fn pages(t: &Task, fd: Fd) -> Vec<(u64, bool, usize)> {
        let f = t.files().fget(fd.0).unwrap();
        let ti = f
            .inode()
            .i_op
            .as_any()
            .downcast_ref::<TmpfsInode>()
            .unwrap();
        let d = ti.reg().unwrap().read_data().page_addrs();
        d
    }

    fn create(t: &Task, path: &str) -> Fd {
        let flags = OpenFlags::CREAT | OpenFlags::RDWR;
        t.openat(Fd::AT_FDCWD, path, flags, 0o600).unwrap()
    }

    /// The data is shared, not copied: the snapshot's pages are the source's own bytes
    /// until a write, which copies only the page it writes; a second snapshot shares
    /// the same bytes again.
    #[test]
    fn pages_are_shared_until_written() {
        let mnt = crate::tmpfs::mount(Default::default());
        let t = Task::init(&mnt);
        let fd = create(&t, "/f");
        t.pwrite(fd, &[5u8; 3 * 4096], 0).unwrap();
        let own = pages(&t, fd);
        assert!(own.iter().all(|p| !p.1), "never snapshotted: owned pages");
        let snap = super::snapshot(&mnt).unwrap();
        let s = Task::init(&snap);
        let sfd = s.openat(Fd::AT_FDCWD, "/f", OpenFlags::RDWR, 0).unwrap();
        let (src, copy) = (pages(&t, fd), pages(&s, sfd));
        assert_eq!(src, copy, "the same bytes, shared on both sides");
        assert!(src.iter().all(|p| p.1));
        assert_eq!(
            src.iter().map(|p| p.2).collect::<Vec<_>>(),
            own.iter().map(|p| p.2).collect::<Vec<_>>(),
            "sharing moved no bytes"
        );
        s.pwrite(sfd, b"x", 4096).unwrap();
        let copy = pages(&s, sfd);
        assert_eq!((copy[1].1, copy[0], copy[2]), (false, src[0], src[2]));
        assert_ne!(
            copy[1].2, src[1].2,
            "the written page is the snapshot's own"
        );
        let again = super::snapshot(&snap).unwrap();
        let a = Task::init(&again);
        let afd = a.openat(Fd::AT_FDCWD, "/f", OpenFlags::RDONLY, 0).unwrap();
        let third = pages(&a, afd);
        assert_eq!(
            third.iter().map(|p| p.2).collect::<Vec<_>>(),
            copy.iter().map(|p| p.2).collect::<Vec<_>>()
        );
        // Once every other holder is gone, a write takes the page back without a copy
        // (a torn-down mount's pages go when the epoch frees its dentries, so the other
        // holder here is a share dropped at once).
        let fresh = crate::tmpfs::mount(Default::default());
        let u = Task::init(&fresh);
        let ufd = create(&u, "/g");
        u.pwrite(ufd, &[1u8; 4096], 0).unwrap();
        let g = u.files().fget(ufd.0).unwrap();
        let gi = g
            .inode()
            .i_op
            .as_any()
            .downcast_ref::<TmpfsInode>()
            .unwrap();
        let before = pages(&u, ufd);
        drop(super::super::regular::share_pages(
            gi.reg().unwrap(),
            g.inode(),
        ));
        assert!(pages(&u, ufd)[0].1, "shared once");
        u.pwrite(ufd, b"y", 0).unwrap();
        assert_eq!(
            pages(&u, ufd),
            before,
            "owned again, the same bytes, no copy"
        );
    }
}
