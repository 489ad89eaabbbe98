//! `renameat`/`renameat2`: rename locking, the loop check, `RENAME_NOREPLACE` and
//! `RENAME_EXCHANGE`.
//!
//! Linux analogue: fs/namei.c (`do_renameat2`, `lock_rename`, `d_ancestor`, `vfs_rename`),
//! mm/shmem.c (`shmem_rename2`, `shmem_exchange`).

use super::*;

impl<V: Variant> Task<V> {
    /// `renameat(2)`: renames `oldpath` to `newpath`, atomically replacing an existing
    /// target (a non-directory, or an empty directory when the source is a directory).
    /// The same as [`renameat2`](Self::renameat2) with no flags.
    ///
    /// # Errors
    /// `ENOENT` (no source), `EBUSY` (`.`, `..` or `/` as either last component), `ENOTDIR`
    /// (source not a directory with a trailing slash on either path; directory over a
    /// non-directory), `EISDIR` (non-directory over a directory), `EINVAL` (a directory into
    /// its own subtree), `ENOTEMPTY` (target directory not empty, or an ancestor of the
    /// source), `EACCES`, `EPERM` (sticky), `EXDEV` (different mounts), `EMLINK`,
    /// `ENAMETOOLONG`, `ELOOP`, `EBADF`.
    ///
    /// # References
    /// rename(2); Linux `do_renameat2`, `lock_rename`, `vfs_rename`, `shmem_rename2`.
    pub fn renameat<'a>(
        &self,
        olddirfd: impl Into<AtDir<'a>>,
        oldpath: impl AsPath,
        newdirfd: impl Into<AtDir<'a>>,
        newpath: impl AsPath,
    ) -> Result<()> {
        let olddirfd: AtDir<'_> = olddirfd.into();
        let newdirfd: AtDir<'_> = newdirfd.into();
        self.renameat2(olddirfd, oldpath, newdirfd, newpath, RenameFlags::empty())
    }

    /// `renameat2(2)`: [`renameat`](Self::renameat) with `flags`: `NOREPLACE` refuses to
    /// replace an existing target; `EXCHANGE` atomically swaps two existing entries, which
    /// may be of different types (both directories, or a directory and a non-directory, in
    /// the same or different parents; the parents' link counts follow a directory that
    /// changes parent). Either way a lockless lookup of either name never misses it.
    ///
    /// Path-walk order as Linux: flags, then the two parent walks, then the checks under
    /// the directory locks (source, then target).
    ///
    /// # Errors
    /// As `renameat`, and:
    /// - `EINVAL`: unknown flags; `EXCHANGE` with `NOREPLACE` or `WHITEOUT`; `WHITEOUT`
    ///   (uvfs has no device inodes, so no whiteouts: Linux tmpfs leaves a 0:0 character
    ///   device at the source; uvfs refuses before looking at the paths); with `EXCHANGE`,
    ///   a directory exchanged with an entry inside its own subtree, either way round.
    /// - `EEXIST`: `NOREPLACE` and the target exists (also for a `.`/`..`/`/` target,
    ///   where `renameat` gives `EBUSY`).
    /// - `ENOENT`: `EXCHANGE` and the target does not exist.
    /// - `ENOTDIR`: `EXCHANGE` with a trailing slash on a non-directory (a trailing slash on
    ///   the target is allowed when the target is a directory, whatever the source).
    /// - `EACCES`: also, for `EXCHANGE` across parents, no write permission on a target
    ///   directory (its `..` changes).
    ///
    /// Exchanging an entry with itself or with another hard link of the same inode succeeds
    /// and changes nothing.
    ///
    /// # References
    /// rename(2) (`renameat2`); Linux `do_renameat2`, `vfs_rename`, `shmem_rename2`,
    /// `simple_rename_exchange`, `simple_offset_rename_exchange`.
    #[doc(alias = "rename")]
    pub fn renameat2<'a>(
        &self,
        olddirfd: impl Into<AtDir<'a>>,
        oldpath: impl AsPath,
        newdirfd: impl Into<AtDir<'a>>,
        newpath: impl AsPath,
        flags: RenameFlags,
    ) -> Result<()> {
        let olddirfd: AtDir<'_> = olddirfd.into();
        let newdirfd: AtDir<'_> = newdirfd.into();
        let known = RenameFlags::NOREPLACE | RenameFlags::EXCHANGE | RenameFlags::WHITEOUT;
        if !(flags - known).is_empty()
            || (flags.contains(RenameFlags::EXCHANGE)
                && flags.intersects(RenameFlags::NOREPLACE | RenameFlags::WHITEOUT))
            || flags.contains(RenameFlags::WHITEOUT)
        {
            return Err(Errno::EINVAL);
        }
        // filename_parentat of the source, then of the target: an error of the first walk
        // wins over any of the second.
        let oldpath = getname(oldpath.path_bytes(), false)?;
        if self.fs.ns.may_block() {
            // `retry_estale`, as `do_renameat2`'s (see `with_parent`).
            let newpath = newpath.path_bytes();
            let r = self.rename_leaving(olddirfd, oldpath, newdirfd, newpath, flags);
            return retry_estale(r, || {
                self.rename_leaving(olddirfd, oldpath, newdirfd, newpath, flags)
            });
        }
        let ostart = self.start(olddirfd, oldpath)?;
        let guard = epoch::pin();
        let root = self.fs.root.load(&guard);
        let cwd = self.fs.cwd.load(&guard);
        let (osd, osm) = ostart.path(cwd);
        let mut nd = Nameidata::new(&guard, &self.cred, root, &self.fs.ns, osm);
        let ol = nd.walk_parent(osd, oldpath)?;
        let newpath = getname(newpath.path_bytes(), false)?;
        let nstart = self.start(newdirfd, newpath)?;
        let (nsd, nsm) = nstart.path(cwd);
        let mut nd2 = Nameidata::new(&guard, &self.cred, root, &self.fs.ns, nsm);
        let nl = nd2.walk_parent(nsd, newpath)?;
        rename_checks(&ol, &nl, flags)?;
        rename_locked(self, &ol, &nl, &self.fs.ns, flags)
    }

    /// [`renameat2`](Self::renameat2) in a namespace where a file system may block: each
    /// walk leaves its pin for the file system's calls (`Unlazy`), and the rename runs
    /// after both, unpinned, the two parents and their mounts counted (as Linux holds them
    /// after `filename_parentat`), so that a RENAME the server holds holds back no
    /// deferred free of the process. `flags` are valid.
    #[inline(never)]
    fn rename_leaving(
        &self,
        olddirfd: AtDir<'_>,
        oldpath: &[u8],
        newdirfd: AtDir<'_>,
        newpath: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        // The parent (counted), the last component, its type and trailing slash.
        let parent = |dirfd, path| {
            self.with_walk(dirfd, path, |nd, start| {
                let l = nd.walk_parent(start, path)?;
                Ok((nd.path(l.dir)?, l.name, l.ty, l.trailing_slash))
            })
        };
        let (op, oname, oty, otrail) = parent(olddirfd, oldpath)?;
        let newpath = getname(newpath, false)?;
        let (np, nname, nty, ntrail) = parent(newdirfd, newpath)?;
        let ol = Last {
            mnt: &op.mnt,
            dir: &op.dentry,
            name: oname,
            ty: oty,
            trailing_slash: otrail,
        };
        let nl = Last {
            mnt: &np.mnt,
            dir: &np.dentry,
            name: nname,
            ty: nty,
            trailing_slash: ntrail,
        };
        rename_checks(&ol, &nl, flags)?;
        rename_locked(self, &ol, &nl, &self.fs.ns, flags)
    }
}

/// `do_renameat2`'s checks between the walks and the locks: one mount, plain last
/// components, write access to the mount, names within `NAME_MAX`.
fn rename_checks(ol: &Last<'_, '_>, nl: &Last<'_, '_>, flags: RenameFlags) -> Result<()> {
    if !std::ptr::eq(ol.mnt, nl.mnt) {
        return Err(Errno::EXDEV);
    }
    if ol.ty != LastType::Norm {
        return Err(Errno::EBUSY);
    }
    if nl.ty != LastType::Norm {
        return Err(if flags.contains(RenameFlags::NOREPLACE) {
            Errno::EEXIST
        } else {
            Errno::EBUSY
        });
    }
    // do_renameat2: mnt_want_write after the last components' types.
    ol.mnt.want_write()?;
    if ol.name.len() > NAME_MAX || nl.name.len() > NAME_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    Ok(())
}

/// The child of `anc` on the way down to `d` (Linux `d_ancestor`), if `anc` is a proper
/// ancestor of `d`. Context: rename lock held.
fn child_towards<'g>(
    anc: &Arc<Dentry>,
    d: &'g Arc<Dentry>,
    g: &'g Guard,
) -> Option<&'g Arc<Dentry>> {
    let mut cur = d;
    loop {
        let p = cur.parent(g)?;
        if Arc::ptr_eq(p, anc) {
            return Some(cur);
        }
        cur = p;
    }
}

/// `lock_rename` + `vfs_rename` + `shmem_rename2`: the checks and the change under the
/// directory locks. `flags` are valid (`renameat2` checked them).
fn rename_locked<V: Variant>(
    task: &Task<V>,
    ol: &Last<'_, '_>,
    nl: &Last<'_, '_>,
    ns: &MntNamespace,
    flags: RenameFlags,
) -> Result<()> {
    let mnt = ol.mnt;
    let cred = &task.cred;
    let exchange = flags.contains(RenameFlags::EXCHANGE);
    let odir_i = &ol.dir.d_inode;
    let ndir_i = &nl.dir.d_inode;
    let odir = ol.dir.dir().ok_or(Errno::ENOTDIR)?;
    let ndir = nl.dir.dir().ok_or(Errno::ENOTDIR)?;
    // One directory: one dentry, or two walks' dentries of a directory out of its tree
    // (each walk of it makes its own, `d_add`; neither index holds anything, so locking
    // either is enough).
    let same = Arc::ptr_eq(ol.dir, nl.dir)
        || (Arc::ptr_eq(odir_i, ndir_i) && ol.dir.is_unhashed() && nl.dir.is_unhashed());
    // The file system's calls (revalidation, lookups, the rename) may block (a FUSE
    // request): no epoch pin is held across them. `g` pins only the steps that read under
    // the epoch (the ancestry, the cookie, the commit), each taken again after such a call.
    let may_block = odir_i.needs_revalidate() || ndir_i.needs_revalidate();
    // lock_rename: same directory -> its lock; else the super block's rename lock, then
    // ancestor first, else by address.
    let _rename_guard = if same {
        None
    } else {
        Some(plock(&mnt.mnt_sb.s_rename_lock))
    };
    let (mut trap_old, mut trap_new) = (None, None);
    let (mut ol_lock, mut nl_lock): (DirLocked<'_>, Option<DirLocked<'_>>) = {
        let g = epoch::pin();
        if same {
            (odir.lock_all(), None)
        } else if let Some(t) = child_towards(ol.dir, nl.dir, &g) {
            // old dir is an ancestor of the new dir.
            trap_old = Some(t.clone());
            let a = odir.lock_all();
            (a, Some(ndir.lock_all()))
        } else if let Some(t) = child_towards(nl.dir, ol.dir, &g) {
            trap_new = Some(t.clone());
            let b = ndir.lock_all();
            (odir.lock_all(), Some(b))
        } else if (odir as *const Dir) < (ndir as *const Dir) {
            let a = odir.lock_all();
            (a, Some(ndir.lock_all()))
        } else {
            let b = ndir.lock_all();
            (odir.lock_all(), Some(b))
        }
    };
    // Before each step that may call the file system (a lookup or revalidation under the
    // locks, a permission check that refreshes attributes, the rename): no lock's own pin
    // held either (`lookup_locked` drops only its own lock's; an index read pins again).
    let unpin_all = |ol_lock: &mut DirLocked<'_>, nl_lock: &mut Option<DirLocked<'_>>| {
        if may_block {
            ol_lock.unpin();
            if let Some(l) = nl_lock {
                l.unpin();
            }
        }
    };
    // do_renameat2, in its order: the source, the target, the flags, trailing slashes, then
    // the traps.
    unpin_all(&mut ol_lock, &mut nl_lock);
    let old = lookup_locked(ol.dir, &mut ol_lock, ol.name)?.ok_or(Errno::ENOENT)?;
    let ndead = match &nl_lock {
        Some(l) => l.dead(),
        None => ol_lock.dead(),
    };
    if ndead {
        // The target's lookup (`lookup_one_qstr_excl`) refuses a dead directory before any
        // flag or permission check.
        return Err(Errno::ENOENT);
    }
    let oi = old.d_inode.clone();
    let is_dir = oi.is_dir();
    unpin_all(&mut ol_lock, &mut nl_lock);
    let target = match &mut nl_lock {
        Some(l) => lookup_locked(nl.dir, l, nl.name)?,
        None => lookup_locked(nl.dir, &mut ol_lock, nl.name)?,
    };
    if flags.contains(RenameFlags::NOREPLACE) && target.is_some() {
        return Err(Errno::EEXIST);
    }
    let new_is_dir = target.as_ref().is_some_and(|t| t.d_inode.is_dir());
    if exchange {
        if target.is_none() {
            return Err(Errno::ENOENT);
        }
        if !new_is_dir && nl.trailing_slash {
            return Err(Errno::ENOTDIR);
        }
    }
    if !is_dir && (ol.trailing_slash || (!exchange && nl.trailing_slash)) {
        return Err(Errno::ENOTDIR);
    }
    if trap_old.as_ref().is_some_and(|t| Arc::ptr_eq(t, &old)) {
        return Err(Errno::EINVAL);
    }
    if let (Some(t), Some(tn)) = (&trap_new, &target) {
        if Arc::ptr_eq(t, tn) {
            return Err(if exchange {
                Errno::EINVAL
            } else {
                Errno::ENOTEMPTY
            });
        }
    }
    // vfs_rename
    if let Some(t) = &target {
        if Arc::ptr_eq(&t.d_inode, &oi) {
            return Ok(());
        }
    }
    unpin_all(&mut ol_lock, &mut nl_lock);
    may_delete(cred, odir_i, &oi, is_dir, ol_lock.dead())?;
    match &target {
        None => may_create(cred, ndir_i, ndead)?,
        // An exchanged target is removed from its place as what it is.
        Some(t) => may_delete(
            cred,
            ndir_i,
            &t.d_inode,
            if exchange { new_is_dir } else { is_dir },
            ndead,
        )?,
    }
    if !same {
        // A directory changing parent needs write permission on itself (its `..` changes).
        if is_dir {
            oi.permission(cred, MAY_WRITE)?;
        }
        if let (true, Some(t)) = (exchange && new_is_dir, &target) {
            t.d_inode.permission(cred, MAY_WRITE)?;
        }
    }
    // vfs_rename: neither may be a mount point of this namespace.
    let mounted = |d: &Arc<Dentry>| d.is_mounted() && ns.table(&epoch::pin()).is_mountpoint(d);
    if mounted(&old) || target.as_ref().is_some_and(mounted) {
        return Err(Errno::EBUSY);
    }
    if !same {
        // tmpfs has no link limit (`s_max_links` 0); uvfs refuses to wrap the 32-bit count.
        if is_dir && !new_is_dir && ndir_i.nlink() == LINK_MAX {
            return Err(Errno::EMLINK);
        }
        if exchange && !is_dir && new_is_dir && odir_i.nlink() == LINK_MAX {
            return Err(Errno::EMLINK);
        }
    }
    if exchange {
        let t = target.as_ref().expect("checked above");
        unpin_all(&mut ol_lock, &mut nl_lock);
        odir_i
            .i_op
            .rename(odir_i, ol.name, ndir_i, nl.name, flags)?;
        exchange_locked(
            ol,
            nl,
            &old,
            t,
            &mut ol_lock,
            &mut nl_lock,
            same,
            &epoch::pin(),
        );
        return Ok(());
    }
    let target_dir = target.as_ref().and_then(|t| t.dir());
    // Lock order: the target is a child of the new dir (locked): parent before child.
    let mut target_lock = target_dir.map(|td| td.lock_all());
    if let (Some(tl), Some(t)) = (&target_lock, &target) {
        // A cache that may be incomplete cannot tell; the file system's rename does.
        if !t.d_inode.needs_revalidate() && !tl.is_empty() {
            return Err(Errno::ENOTEMPTY);
        }
    }
    // Within one directory the entry keeps its getdents position, so a listing that runs
    // during the rename shows it once, under one of its names. (Linux 6.18's offset map gives
    // it a new offset, and a listing can then show it twice: issue 4 asks to do better.)
    // Into another directory it gets that directory's next cookie, reserved before the file
    // system commits, as its `ENOSPC` is the last error.
    let cookie = match &mut nl_lock {
        None => old.link(&epoch::pin()).cookie,
        Some(l) => l.next_cookie(nl.name)?,
    };
    // `next_cookie` and the target's `is_empty` may have pinned again.
    unpin_all(&mut ol_lock, &mut nl_lock);
    if let (true, Some(tl)) = (may_block, &mut target_lock) {
        tl.unpin();
    }
    odir_i
        .i_op
        .rename(odir_i, ol.name, ndir_i, nl.name, flags)?;
    let g = epoch::pin();
    if let Some(mut tl) = target_lock {
        tl.set_dead();
        let stale = tl.clear();
        // Marked under the lock they left under (see `unhash`).
        stale.iter().for_each(unhash);
        drop(tl);
        shrink_children(stale, false);
    }
    // Commit: nothing below can fail. Each skip-list change is seen by lookups as it is made;
    // a replaced target is bracketed by `replace_begin`/`replace_end` (dcache.rs), so a lookup
    // of the new name sees the old or the new entry, never neither (rename(2)).
    let now = coarse_now();
    ol_lock.remove(ol.name);
    let nlock: &mut DirLocked<'_> = match &mut nl_lock {
        Some(l) => l,
        None => &mut ol_lock,
    };
    let mut target_time = None;
    if let Some(t) = &target {
        nlock.replace_begin();
        nlock.remove(nl.name);
        d_delete(t);
        // shmem_rename2 unlinks the target first (see `unlinkat`).
        let tnow = ndir_i.current_time(now);
        target_time = Some(
            t.d_inode
                .add_nlink(if is_dir { -2 } else { -1 }, Some(tnow)),
        );
        if is_dir {
            odir_i.add_nlink(-1, None);
        }
    } else if is_dir && !same {
        odir_i.add_nlink(-1, None);
        ndir_i.add_nlink(1, None);
    }
    let name: Name = Arc::from(nl.name);
    old.d_link.replace(
        DLink {
            parent: Some(crate::dentry::ParentLink::new(nl.dir)),
            name: name.clone(),
            cookie,
        },
        &g,
    );
    d_add(nl.dir, nlock, name, old, cookie);
    nlock.replace_end();
    if let Some(t) = target_time {
        ndir_i.touch_mtime_ctime(t);
    }
    // simple_rename_timestamp: each inode its own current time from the one coarse `now`
    // (Linux stamps the target's ctime once more here, a no-op after its unlink).
    odir_i.touch_mtime_ctime(now);
    if !same {
        ndir_i.touch_mtime_ctime(now);
    }
    oi.touch_ctime(now);
    Ok(())
}

/// The commit of `RENAME_EXCHANGE` (`simple_offset_rename_exchange` +
/// `simple_rename_exchange` + `d_exchange`): `old` (named `ol`) and `target` (named `nl`)
/// swap names, parents and getdents cookies; the parents' link counts follow a directory
/// exchanged with a non-directory across parents; both parents' mtime and ctime and both
/// inodes' ctime are stamped. Nothing here fails. Context: caller holds both directory locks
/// (`ol_lock`, and `nl_lock` unless `same`) and checked everything.
#[allow(clippy::too_many_arguments)]
fn exchange_locked<'l>(
    ol: &Last<'_, '_>,
    nl: &Last<'_, '_>,
    old: &Arc<Dentry>,
    target: &Arc<Dentry>,
    ol_lock: &mut DirLocked<'l>,
    nl_lock: &mut Option<DirLocked<'l>>,
    same: bool,
    g: &Guard,
) {
    let (odir_i, ndir_i) = (&ol.dir.d_inode, &nl.dir.d_inode);
    let (oi, ti) = (&old.d_inode, &target.d_inode);
    let now = coarse_now();
    let (oc, tc) = (old.link(g).cookie, target.link(g).cookie);
    let (oname, nname): (Name, Name) = (Arc::from(ol.name), Arc::from(nl.name));
    // Both names are replaced, not removed: lockless lookups that miss either wait for the
    // exchange to end (dcache.rs), so neither name is ever seen missing.
    ol_lock.replace_begin();
    if let Some(l) = nl_lock.as_mut() {
        l.replace_begin();
    }
    old.d_link.replace(
        DLink {
            parent: Some(crate::dentry::ParentLink::new(nl.dir)),
            name: nname.clone(),
            cookie: tc,
        },
        g,
    );
    target.d_link.replace(
        DLink {
            parent: Some(crate::dentry::ParentLink::new(ol.dir)),
            name: oname.clone(),
            cookie: oc,
        },
        g,
    );
    if ol.dir.is_unhashed() || nl.dir.is_unhashed() {
        // One parent has left its tree (see `d_add`): neither entry can be indexed where
        // it goes, so both names leave the cache; the next lookups ask the file system.
        // (What either index held under these names is `old` or `target`.)
        ol_lock.remove(&oname);
        if let Some(l) = nl_lock.as_mut() {
            l.remove(&nname);
            l.replace_end();
        } else {
            ol_lock.remove(&nname);
        }
        ol_lock.replace_end();
        // Marked under the locks they left under (see `unhash`).
        unhash(old);
        unhash(target);
        shrink_children(vec![old.clone(), target.clone()], false);
    } else {
        ol_lock.exchange_entry(oname, target.clone(), oc);
        let nlock: &mut DirLocked<'l> = match nl_lock {
            Some(l) => l,
            None => ol_lock,
        };
        nlock.exchange_entry(nname, old.clone(), tc);
        nlock.replace_end();
        ol_lock.replace_end();
    }
    if !same && oi.is_dir() != ti.is_dir() {
        // The directory's `..` moves from one parent to the other.
        let (from, to) = if oi.is_dir() {
            (odir_i, ndir_i)
        } else {
            (ndir_i, odir_i)
        };
        from.add_nlink(-1, None);
        to.add_nlink(1, None);
    }
    // simple_rename_timestamp: both parents' mtime and ctime, both inodes' ctime.
    odir_i.touch_mtime_ctime(now);
    if !same {
        ndir_i.touch_mtime_ctime(now);
    }
    oi.touch_ctime(now);
    ti.touch_ctime(now);
}
