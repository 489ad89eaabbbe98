//! The path walk (`Nameidata`): components, `.` and `..`, symlinks, lookups in the dentry
//! cache and, for file systems that revalidate, in the file system.
//!
//! Linux analogue: fs/namei.c (`link_path_walk`, `walk_component`, `lookup_fast`,
//! `lookup_slow`, `handle_dots`, `pick_link`).

use super::*;

impl<'a> Nameidata<'a> {
    // Inline: the thread-local store of the caller made it a call of its own (28
    // instructions per open+close more, callgrind).
    #[inline]
    pub(crate) fn new(
        guard: &'a Guard,
        cred: &'a Cred,
        root: &'a Path,
        ns: &'a MntNamespace,
        mnt: &'a Mount,
    ) -> Nameidata<'a> {
        crate::cred::set_caller(cred);
        Nameidata {
            guard,
            cred,
            root,
            mnt,
            ns,
            total_links: 0,
            flags: 0,
            unlazy: None,
        }
    }

    /// `may_lookup`: search permission on `dir`. On a walk that can leave (`Unlazy`), a
    /// check the file system would block for (`MAY_NOT_BLOCK`: `ECHILD`) is made unpinned
    /// by `with_walk`, and its result kept for the rest of the call.
    #[inline]
    fn may_lookup(&self, dir: &Arc<Dentry>) -> Result<()> {
        let i = &dir.d_inode;
        // The mode bits alone (tmpfs): as before walks could leave, no branch more.
        if !i.permission_asks_fs() {
            return i.generic_permission(self.cred, MAY_EXEC);
        }
        self.may_lookup_fs(dir)
    }

    /// [`may_lookup`](Self::may_lookup) where the file system decides (and may block).
    #[inline(never)]
    fn may_lookup_fs(&self, dir: &Arc<Dentry>) -> Result<()> {
        let i = &dir.d_inode;
        let Some(cell) = self.unlazy else {
            return i.i_op.permission(i, self.cred, MAY_EXEC);
        };
        match i.i_op.permission(i, self.cred, MAY_EXEC | MAY_NOT_BLOCK) {
            Err(Errno::ECHILD) => self.may_lookup_unlazy(cell, dir),
            r => r,
        }
    }

    /// [`may_lookup`](Self::may_lookup) for a check that would block: the result this
    /// call's walk kept, else leave the walk for it (`ECHILD`), else (past `MAX_UNLAZY`)
    /// the check made pinned.
    #[cold]
    fn may_lookup_unlazy(&self, cell: &UnlazyCell, dir: &Arc<Dentry>) -> Result<()> {
        let mut u = cell.get();
        if let Some(r) = Unlazy::find(&u.searched, |d| Arc::ptr_eq(d, dir)) {
            return r;
        }
        if u.times < MAX_UNLAZY {
            u.want = Some(Want::Search(dir.clone()));
            return Err(Errno::ECHILD);
        }
        drop(u);
        dir.d_inode.permission(self.cred, MAY_EXEC)
    }

    /// Whether the walk is at its root (the task's, or a scoped walk's start).
    #[inline]
    fn at_root(&self, d: &Arc<Dentry>) -> bool {
        Arc::ptr_eq(d, &self.root.dentry) && std::ptr::eq(self.mnt, &*self.root.mnt)
    }

    /// `traverse_mounts`: from `d` (in `self.mnt`), down through every mount stacked on it,
    /// to the topmost mount's root; `d` itself when nothing is mounted there.
    ///
    /// # Errors
    /// `EXDEV` under `LOOKUP_NO_XDEV` when there is a mount to cross.
    #[inline(always)]
    pub(crate) fn follow_mounts(&mut self, d: &'a Arc<Dentry>) -> Result<&'a Arc<Dentry>> {
        if !d.is_mounted() {
            return Ok(d);
        }
        self.follow_mounts_slow(d)
    }

    /// [`follow_mounts`](Self::follow_mounts) at a dentry marked mounted.
    #[cold]
    #[inline(never)]
    fn follow_mounts_slow(&mut self, mut d: &'a Arc<Dentry>) -> Result<&'a Arc<Dentry>> {
        let table = self.ns.table(self.guard);
        while let Some(m) = crate::mount::mounted_on(table, self.mnt, d) {
            if self.flags & LOOKUP_NO_XDEV != 0 {
                return Err(Errno::EXDEV);
            }
            self.mnt = &**m;
            d = &m.mnt_root;
        }
        Ok(d)
    }

    /// `follow_dotdot`'s climb out of mount roots: from `d`, while it is the root of the
    /// walk's current mount (and not the walk's root), up to the mount point in the parent
    /// mount. `None` when `d` is the root of the namespace's top mount or of a detached one.
    fn climb_mounts(&mut self, mut d: &'a Arc<Dentry>) -> Result<Option<&'a Arc<Dentry>>> {
        let table = self.ns.table(self.guard);
        while Arc::ptr_eq(d, &self.mnt.mnt_root) {
            if self.at_root(d) {
                return Ok(Some(d));
            }
            let Some(mp) = table.parent(self.mnt) else {
                return Ok(None);
            };
            if self.flags & LOOKUP_NO_XDEV != 0 {
                return Err(Errno::EXDEV);
            }
            self.mnt = &*mp.parent;
            d = &mp.dentry;
        }
        Ok(Some(d))
    }

    /// `..` of `cur`, clamped at the walk's root and at the namespace's root; crosses mount
    /// roots upwards and then any mount on the parent downwards (`follow_dotdot`,
    /// `step_into`).
    ///
    /// # Errors
    /// `EXDEV` under `LOOKUP_NO_XDEV` for a crossing; scoped walks only: `EXDEV` at the root
    /// with `LOOKUP_BENEATH`; `EAGAIN` when the parent is no longer under the walk's root (a
    /// concurrent rename moved a directory out from under the walk; Linux: the
    /// `rename_lock` seqcount retry in `handle_dots`).
    fn dotdot(&mut self, cur: &'a Arc<Dentry>) -> Result<&'a Arc<Dentry>> {
        if self.flags & LOOKUP_IS_SCOPED != 0 {
            return self.dotdot_scoped(cur);
        }
        if self.at_root(cur) {
            return Ok(cur);
        }
        let Some(d) = self.climb_mounts(cur)? else {
            return Ok(&self.mnt.mnt_root);
        };
        if self.at_root(d) {
            return Ok(d);
        }
        let p = d.parent(self.guard).unwrap_or(d);
        self.follow_mounts(p)
    }

    /// `follow_dotdot` for `RESOLVE_BENEATH`/`RESOLVE_IN_ROOT` (see `dotdot`).
    #[cold]
    fn dotdot_scoped(&mut self, cur: &'a Arc<Dentry>) -> Result<&'a Arc<Dentry>> {
        if self.at_root(cur) {
            // At the walk's root: `in_root`.
            if self.flags & LOOKUP_BENEATH != 0 {
                return Err(Errno::EXDEV);
            }
            return Ok(cur);
        }
        let d = match self.climb_mounts(cur)? {
            Some(d) if !self.at_root(d) => d,
            // The walk's root (reached climbing) or the namespace's top: `in_root`.
            _ if self.flags & LOOKUP_BENEATH != 0 => return Err(Errno::EXDEV),
            Some(d) => return Ok(d),
            None => return Ok(&self.mnt.mnt_root),
        };
        let Some(parent) = d.parent(self.guard) else {
            return Ok(d);
        };
        // The parent must still be under the walk's root: climb from it (across mounts) to
        // the root without moving the walk.
        let (mut a, mut am) = (parent, self.mnt);
        let table = self.ns.table(self.guard);
        loop {
            if Arc::ptr_eq(a, &self.root.dentry) && std::ptr::eq(am, &*self.root.mnt) {
                break;
            }
            if Arc::ptr_eq(a, &am.mnt_root) {
                let mp = table.parent(am).ok_or(Errno::EAGAIN)?;
                am = &*mp.parent;
                a = &mp.dentry;
                continue;
            }
            a = a.parent(self.guard).ok_or(Errno::EAGAIN)?;
        }
        self.follow_mounts(parent)
    }

    /// Looks `name` up in directory `dir` (search permission already checked); follows a
    /// symlink result when `follow`.
    fn step(&mut self, dir: &'a Arc<Dentry>, name: &[u8], follow: bool) -> Result<&'a Arc<Dentry>> {
        let next = match name {
            b"." => dir,
            b".." => self.dotdot(dir)?,
            _ => {
                if name.len() > NAME_MAX {
                    return Err(Errno::ENAMETOOLONG);
                }
                let d = self.lookup_cached(dir, name)?.ok_or(Errno::ENOENT)?;
                self.follow_mounts(d)?
            }
        };
        if follow && next.d_inode.is_symlink() {
            return self.follow_link(dir, next);
        }
        Ok(next)
    }

    /// `lookup_fast` (and `lookup_slow` when it must): the entry `name` of directory `dir`
    /// (search permission checked by the caller), `None` when there is none. Lock-free for
    /// a complete cache (tmpfs); for a directory marked `I_REVALIDATE`, a cached entry is
    /// revalidated and a miss asks the file system.
    ///
    /// # Errors
    /// `ENOTDIR` when `dir` is not a directory; the file system's.
    #[inline]
    pub(crate) fn lookup_cached(
        &self,
        dir: &'a Arc<Dentry>,
        name: &[u8],
    ) -> Result<Option<&'a Arc<Dentry>>> {
        let d = dir.dir().ok_or(Errno::ENOTDIR)?;
        match d.lookup(name, self.guard) {
            // The fast path: a cached entry that needs no revalidation (tmpfs: every one).
            Some(e) if !e.needs_revalidate() => Ok(Some(e)),
            found => self.lookup_revalidate(dir, name, found),
        }
    }

    /// [`lookup_cached`](Self::lookup_cached) past its fast path: a miss (`ENOENT`, or for
    /// a directory marked `I_REVALIDATE` the file system's lookup) or an entry to
    /// revalidate (lock-free first, then under the directory lock).
    #[cold]
    fn lookup_revalidate(
        &self,
        dir: &'a Arc<Dentry>,
        name: &[u8],
        found: Option<&'a Arc<Dentry>>,
    ) -> Result<Option<&'a Arc<Dentry>>> {
        let di = &dir.d_inode;
        match found {
            Some(e) => match di.i_op.revalidate(di, name, &e.d_inode, true) {
                Ok(true) => Ok(Some(e)),
                Ok(false) | Err(Errno::ECHILD) => self.step_slow(dir, name),
                Err(err) => Err(err),
            },
            None if di.needs_revalidate() => self.step_slow(dir, name),
            None => Ok(None),
        }
    }

    /// `e` as a reference that lives as long as the walk's pin, for an entry no index node
    /// lends the walk (one left out of the cache, or one `Unlazy` kept): kept alive the way
    /// the index's nodes are, freed by the epoch after the walk's guard (and every other
    /// pinned now) has gone.
    fn keep(&self, e: Arc<Dentry>) -> &'a Arc<Dentry> {
        let kept = Box::into_raw(Box::new(e));
        // SAFETY: `kept` is a fresh allocation freed only by this deferred call, which runs
        // after `self.guard` unpins, so the reference returned (which lives no longer than
        // `self.guard`'s borrow, 'a) stays valid; nothing writes through it.
        unsafe {
            self.guard
                .defer_unchecked(move || drop(Box::from_raw(kept)));
            &*kept
        }
    }

    /// `lookup_slow`: the entry `name` of `dir` (marked `I_REVALIDATE`) after a miss or a
    /// failed lock-free revalidation: under the directory's lock, revalidated or looked up
    /// by the file system and linked into the dentry cache ([`lookup_locked`]).
    ///
    /// # Errors
    /// The file system's.
    #[cold]
    fn step_slow(&self, dir: &'a Arc<Dentry>, name: &[u8]) -> Result<Option<&'a Arc<Dentry>>> {
        let d = dir.dir().ok_or(Errno::ENOTDIR)?;
        if let Some(cell) = self.unlazy {
            let mut u = cell.get();
            let kept = Unlazy::find(&u.got, |(kd, kn)| Arc::ptr_eq(kd, dir) && **kn == *name);
            if let Some(r) = kept {
                return Ok(r?.map(|e| self.keep(e)));
            }
            if u.times < MAX_UNLAZY {
                // Leave the walk (`Unlazy`): `with_walk` makes the lookup unpinned.
                u.want = Some(Want::Lookup(dir.clone(), name.into()));
                return Err(Errno::ECHILD);
            }
        }
        loop {
            let mut dl = d.lock_name(name);
            let Some(e) = lookup_locked(dir, &mut dl, name)? else {
                return Ok(None);
            };
            if e.is_unhashed() {
                // Left out of the index (`d_add`: `dir` has left its tree), so no node of
                // it lends the walk a reference that lives as long as its pin.
                return Ok(Some(self.keep(e)));
            }
            drop(dl);
            // The entry is in the cache now, valid while the walk's guard is pinned; a
            // concurrent unlink may take it away again, and then it is looked up anew.
            if let Some(e) = d.lookup(name, self.guard) {
                return Ok(Some(e));
            }
        }
    }

    /// `pick_link`: resolves symlink `link` found in `dir`.
    fn follow_link(
        &mut self,
        dir: &'a Arc<Dentry>,
        link: &'a Arc<Dentry>,
    ) -> Result<&'a Arc<Dentry>> {
        self.count_link()?;
        link.d_inode.touch_atime();
        let body = self.link_body(link)?;
        if body.is_empty() {
            return Err(Errno::ENOENT);
        }
        self.walk(dir, body, true, false)
    }

    /// The target of the symlink `link` (`->get_link`). On a walk that can leave
    /// (`Unlazy`), a target the file system would block for (`get_link_rcu`: `ECHILD`) is
    /// read by `with_walk` unpinned; an error it gave is kept for the rest of the call (a
    /// target is kept by the file system itself).
    pub(crate) fn link_body(&self, link: &'a Arc<Dentry>) -> Result<&'a [u8]> {
        let i = &link.d_inode;
        let Some(cell) = self.unlazy else {
            return i.i_op.get_link(i);
        };
        match i.i_op.get_link_rcu(i) {
            Err(Errno::ECHILD) => {}
            r => return r,
        }
        let mut u = cell.get();
        if let Some(e) = Unlazy::find(&u.link_errors, |d| Arc::ptr_eq(d, link)) {
            return Err(e);
        }
        if u.times < MAX_UNLAZY {
            u.want = Some(Want::Link(link.clone()));
            return Err(Errno::ECHILD);
        }
        drop(u);
        i.i_op.get_link(i)
    }

    /// `link_path_walk`: walks every component of `path` but the last, starting at `start`
    /// (or the root for an absolute path), checking search permission on the directory of
    /// each component including the last.
    ///
    /// # Errors
    /// `ENOTDIR` if `start` or an intermediate component is not a directory; `ENOENT`,
    /// `EACCES`, `ELOOP`, `ENAMETOOLONG` from the components.
    pub(crate) fn walk_parent<'p>(
        &mut self,
        start: &'a Arc<Dentry>,
        path: &'p [u8],
    ) -> Result<Last<'a, 'p>> {
        let (mut cur, mut rest) = match path.first() {
            // nd_jump_root: RESOLVE_BENEATH refuses absolute paths and symlinks, and
            // RESOLVE_NO_XDEV a jump to a root on another mount.
            Some(b'/') if self.flags & LOOKUP_BENEATH != 0 => return Err(Errno::EXDEV),
            Some(b'/') => {
                let rm: &'a Mount = &self.root.mnt;
                if self.flags & LOOKUP_NO_XDEV != 0 && !std::ptr::eq(self.mnt, rm) {
                    return Err(Errno::EXDEV);
                }
                self.mnt = rm;
                (&self.root.dentry, path)
            }
            _ => (start, path),
        };
        while let [b'/', tail @ ..] = rest {
            rest = tail;
        }
        if rest.is_empty() {
            return Ok(Last {
                mnt: self.mnt,
                dir: cur,
                name: rest,
                ty: LastType::Root,
                trailing_slash: false,
            });
        }
        loop {
            if !cur.d_inode.is_dir() {
                return Err(Errno::ENOTDIR);
            }
            self.may_lookup(cur)?;
            let end = rest.iter().position(|&c| c == b'/').unwrap_or(rest.len());
            let comp = &rest[..end];
            let mut after = &rest[end..];
            while let [b'/', tail @ ..] = after {
                after = tail;
            }
            if after.is_empty() {
                let ty = match comp {
                    b"." => LastType::Dot,
                    b".." => LastType::DotDot,
                    _ => LastType::Norm,
                };
                return Ok(Last {
                    mnt: self.mnt,
                    dir: cur,
                    name: comp,
                    ty,
                    trailing_slash: end < rest.len(),
                });
            }
            cur = self.step(cur, comp, true)?;
            rest = after;
        }
    }

    /// Resolves the last component of a walked path: `follow` a final symlink, and require a
    /// directory when `want_dir` or the path had a trailing slash.
    ///
    /// # Errors
    /// `ENOENT`, `ENOTDIR`, `ELOOP`, `ENAMETOOLONG` as the walk.
    pub(crate) fn lookup_last(
        &mut self,
        last: Last<'a, '_>,
        follow: bool,
        want_dir: bool,
    ) -> Result<&'a Arc<Dentry>> {
        let follow = follow || last.trailing_slash;
        let want_dir = want_dir || last.trailing_slash;
        self.mnt = last.mnt;
        let d = match last.ty {
            LastType::Root | LastType::Dot => last.dir,
            LastType::DotDot => self.dotdot(last.dir)?,
            LastType::Norm => self.step(last.dir, last.name, follow)?,
        };
        if want_dir && !d.d_inode.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        Ok(d)
    }

    /// [`walk`](Self::walk), where an empty `path` (`AT_EMPTY_PATH`, checked by the
    /// caller's `getname`) is `start` itself.
    pub(crate) fn walk_or_start(
        &mut self,
        start: &'a Arc<Dentry>,
        path: &[u8],
        follow: bool,
    ) -> Result<&'a Arc<Dentry>> {
        if path.is_empty() {
            return Ok(start);
        }
        self.walk(start, path, follow, false)
    }

    /// Walks `path` from `start` to its final dentry.
    pub(crate) fn walk(
        &mut self,
        start: &'a Arc<Dentry>,
        path: &[u8],
        follow: bool,
        want_dir: bool,
    ) -> Result<&'a Arc<Dentry>> {
        let last = self.walk_parent(start, path)?;
        self.lookup_last(last, follow, want_dir)
    }

    /// Counts one more symlink followed by a caller that restarts a walk at a symlink body
    /// (open with `O_CREAT`).
    ///
    /// # Errors
    /// `ELOOP` past 40, or at once under `LOOKUP_NO_SYMLINKS`.
    pub(crate) fn count_link(&mut self) -> Result<()> {
        if self.flags & LOOKUP_NO_SYMLINKS != 0 {
            return Err(Errno::ELOOP);
        }
        self.total_links += 1;
        if self.total_links > MAXSYMLINKS {
            return Err(Errno::ELOOP);
        }
        Ok(())
    }
}

/// `d_add`: makes `d` the entry `name` (with getdents cookie `cookie`) in the index of
/// directory `dir`, whose lock `dl` the caller holds, unless `dir` has left its tree or
/// `d` is not in one. Then `d` is left out of every index, and marked unhashed with what
/// is cached below it ([`shrink_children`]): the next lookup of the name asks the file
/// system again, as for any name that is not cached.
///
/// Why: a directory that left its tree while something still stands in it (a file
/// system's directory dropped by `d_invalidate`, as a hostfs directory renamed on the host
/// while it is a task's working directory; a removed one is marked dead and makes no
/// entries) is no longer reached from its parent, and its index is never emptied again;
/// an entry there would hold the directory (its link) while the directory's index held
/// the entry, a cycle that leaks both. A dentry that came from such a directory (`d`
/// unhashed: rename moves it) cannot be hashed again ([`unhash`] is once). Linux hashes
/// both and lets its LRU shrinker free them; uvfs has no LRU. Only file systems whose
/// cache may be incomplete (`I_REVALIDATE`: hostfs, the FUSE client) invalidate
/// directories, so a tmpfs entry is always indexed.
///
/// Exact under the one bucket lock: [`unhash`] marks a directory before its index is
/// emptied under all of its locks (`shrink_children`), so an insert that takes the bucket
/// lock first is removed by that emptying, and one that takes it after sees the mark (the
/// lock's release and acquire order them).
///
/// Context: `dl` locks `name`'s bucket; `d`'s own index may be locked here (a child's lock
/// after its parent's, the lock order of inode.rs).
pub(crate) fn d_add(
    dir: &Arc<Dentry>,
    dl: &mut DirLocked<'_>,
    name: Name,
    d: Arc<Dentry>,
    cookie: u64,
) {
    if dir.is_unhashed() || d.is_unhashed() {
        shrink_children(vec![d], false);
        return;
    }
    dl.insert(name, d, cookie);
}

/// The entry `name` of directory `dir`, whose lock `dl` the caller holds: the cached one, or
/// for a directory marked `I_REVALIDATE` the file system's (`d_revalidate`, then
/// `->lookup` on a miss, linking the result into the cache; a stale entry is dropped
/// first). For a complete cache (tmpfs) this is the cache lookup alone.
///
/// # Errors
/// The file system's; none for a complete cache.
pub(crate) fn lookup_locked(
    dir: &Arc<Dentry>,
    dl: &mut DirLocked<'_>,
    name: &[u8],
) -> Result<Option<Arc<Dentry>>> {
    let di = &dir.d_inode;
    if let Some(d) = dl.get(name).cloned() {
        if !d.needs_revalidate() {
            return Ok(Some(d));
        }
        // The file system may block (a FUSE request): not pinned meanwhile
        // (`DirLocked::unpin`), the lock held.
        dl.unpin();
        if di.i_op.revalidate(di, name, &d.d_inode, false)? {
            return Ok(Some(d));
        }
        // d_invalidate: the entry changed behind the VFS's back; what was cached below it
        // goes too (a fresh lookup makes a new dentry with an empty index).
        dl.remove(name);
        mark_deleted(&d);
        shrink_children(vec![d], false);
    }
    if !di.needs_revalidate() || dl.dead() {
        return Ok(None);
    }
    dl.unpin();
    let Some(inode) = di.i_op.lookup(di, name)? else {
        return Ok(None);
    };
    let cookie = dl.next_cookie(name)?;
    let name: Name = Arc::from(name);
    let d = Dentry::new_arc(inode, Some(dir), name.clone(), cookie);
    d_add(dir, dl, name, d.clone(), cookie);
    Ok(Some(d))
}

/// `fuse_direntplus_link`: makes `inode` the entry `name` of `dir` in the dentry cache, as
/// a listing handed it (see [`DirLink`](crate::fs::DirLink)); `dl` holds `dir`'s lock.
/// The cached entry `name` is kept when it names `inode` already; one naming another
/// inode is dropped with what was cached below it (`d_invalidate`) unless something is
/// mounted on it, which keeps it (and `inode` is not linked). An invalid name, or a
/// directory already removed or out of its tree (see [`d_add`]), links nothing.
pub(crate) fn link_listed(
    dir: &Arc<Dentry>,
    dl: &mut DirLocked<'_>,
    name: &[u8],
    inode: Arc<Inode>,
) {
    if name.is_empty()
        || name == b"."
        || name == b".."
        || name.len() > NAME_MAX
        || name.iter().any(|&b| b == b'/' || b == 0)
        || dl.dead()
        || dir.is_unhashed()
    {
        return;
    }
    if let Some(d) = dl.get(name) {
        if Arc::ptr_eq(&d.d_inode, &inode) || d.is_mounted() {
            return;
        }
        if let Some(old) = dl.remove(name) {
            mark_deleted(&old);
            shrink_children(vec![old], false);
        }
    }
    let Ok(cookie) = dl.next_cookie(name) else {
        return;
    };
    let name: Name = Arc::from(name);
    let d = Dentry::new_arc(inode, Some(dir), name.clone(), cookie);
    d_add(dir, dl, name, d, cookie);
}
