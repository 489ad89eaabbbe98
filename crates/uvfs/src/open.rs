//! `openat`, `close`, `dup`/`dup2`/`dup3`, `fcntl`, `close_range`, exec's close-on-exec.
//!
//! Linux analogue: fs/open.c (`do_sys_openat2`, `build_open_flags`, `do_dentry_open`),
//! fs/namei.c (`path_openat`, `open_last_lookups`, `do_open`, `may_open`,
//! `handle_truncate`), fs/file.c (`ksys_dup3`, `close_range`), fs/fcntl.c.

use crate::cred::{MAY_READ, MAY_WRITE};
use crate::dentry::Dentry;
use crate::file::{FMode, File, FileHandle};
use crate::mount::{MountFlags, Path};
use crate::namei::AtDir;
use crate::namei::{
    create_locked, getname, inode_init_owner, mode_strip_sgid, Last, LastType, NAME_MAX,
};
use crate::task::Task;
use crate::types::*;
use crate::variant::Variant;
use crate::{Errno, Result};
use std::sync::Arc;

/// `close_range` flag: unshare the fd table first.
pub const CLOSE_RANGE_UNSHARE: u32 = 1 << 1;
/// `close_range` flag: set close-on-exec instead of closing.
pub const CLOSE_RANGE_CLOEXEC: u32 = 1 << 2;
/// `F_GETFD`/`F_SETFD` flag bit: close-on-exec.
pub const FD_CLOEXEC: i32 = 1;

/// A `fcntl(2)` command with its argument. The record-lock commands (`F_GETLK`,
/// `F_SETLK`, `F_SETLKW`, `F_OFD_*`), whose argument is a `struct flock` they may write
/// back, are [`Task::fcntl_lock`]'s ([`LockCmd`](crate::LockCmd)).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Fcntl {
    /// `F_DUPFD`: duplicate to the lowest free fd `>= arg`.
    DupFd(i32),
    /// `F_DUPFD_CLOEXEC`: as `DupFd`, with close-on-exec set.
    DupFdCloexec(i32),
    /// `F_GETFD`: returns `FD_CLOEXEC` or 0.
    GetFd,
    /// `F_SETFD`: sets close-on-exec from bit `FD_CLOEXEC`.
    SetFd(i32),
    /// `F_GETFL`: returns the access mode and status flags.
    GetFl,
    /// `F_SETFL`: changes `O_APPEND`, `O_NONBLOCK` (`O_ASYNC`, `O_DIRECT`, `O_NOATIME`
    /// are accepted and stored); other bits are ignored.
    SetFl(u32),
}

/// Flags `F_SETFL` may change (`SETFL_MASK`).
const SETFL_MASK: u32 = OpenFlags::APPEND.bits()
    | OpenFlags::NONBLOCK.bits()
    | OpenFlags::ASYNC.bits()
    | OpenFlags::DIRECT.bits()
    | OpenFlags::NOATIME.bits();

/// The flags of an open that creates its file, as the file system's create sees them
/// ([`NewInode::open`](crate::fs::NewInode)): `build_open_flags` drops unknown bits and
/// `O_CLOEXEC` and adds `O_LARGEFILE`.
fn creating_open_flags(flags: OpenFlags) -> OpenFlags {
    ((flags & VALID_OPEN_FLAGS) - OpenFlags::CLOEXEC) | OpenFlags::LARGEFILE
}

/// The flags `open` knows (`VALID_OPEN_FLAGS`, include/linux/fcntl.h); other bits are
/// ignored and not kept in the file's flags (so `F_GETFL` never shows them).
const VALID_OPEN_FLAGS: OpenFlags = OpenFlags::ACCMODE
    .union(OpenFlags::CREAT)
    .union(OpenFlags::EXCL)
    .union(OpenFlags::NOCTTY)
    .union(OpenFlags::TRUNC)
    .union(OpenFlags::APPEND)
    .union(OpenFlags::NONBLOCK)
    .union(OpenFlags::DSYNC)
    .union(OpenFlags::ASYNC)
    .union(OpenFlags::DIRECT)
    .union(OpenFlags::LARGEFILE)
    .union(OpenFlags::DIRECTORY)
    .union(OpenFlags::NOFOLLOW)
    .union(OpenFlags::NOATIME)
    .union(OpenFlags::CLOEXEC)
    .union(OpenFlags::SYNC)
    .union(OpenFlags::PATH)
    .union(OpenFlags::TMPFILE);

/// The flags `O_PATH` keeps (`O_PATH_FLAGS`): the others are dropped by `open` and refused
/// by `openat2`.
pub(crate) const O_PATH_FLAGS: OpenFlags = OpenFlags::DIRECTORY
    .union(OpenFlags::NOFOLLOW)
    .union(OpenFlags::PATH)
    .union(OpenFlags::CLOEXEC);

/// `build_open_how` for `open`/`openat`: drops unknown bits, and with `O_PATH` every flag
/// but `O_PATH_FLAGS` ("O_PATH beats everything else").
pub(crate) fn build_open_how(flags: OpenFlags) -> OpenFlags {
    let flags = flags & VALID_OPEN_FLAGS;
    if flags.contains(OpenFlags::PATH) {
        flags & O_PATH_FLAGS
    } else {
        flags
    }
}

/// What opening a FIFO, socket or device node (other than with `O_PATH`) returns, after
/// the permission checks: uvfs has no pipes, sockets or device drivers.
/// - socket: `ENXIO` (Linux `sock_no_open`);
/// - character or block device: `ENXIO` (Linux: no driver registered for the number);
/// - FIFO with `O_WRONLY|O_NONBLOCK`: `ENXIO`, as Linux when no reader has it open (no
///   one can here);
/// - FIFO otherwise: `EOPNOTSUPP` (Linux would block until the other end opens, or with
///   `O_RDONLY|O_NONBLOCK` or `O_RDWR` succeed; uvfs has no pipe to give).
fn special_open_errno(mode: u32, flags: OpenFlags) -> Errno {
    if mode & S_IFMT == S_IFIFO {
        let nonblock_writer = flags.access_mode() == 1 && flags.contains(OpenFlags::NONBLOCK);
        if nonblock_writer {
            Errno::ENXIO
        } else {
            Errno::EOPNOTSUPP
        }
    } else {
        Errno::ENXIO
    }
}

/// How many times `open(O_CREAT)` without `O_EXCL` looks a name up again after the file
/// system's create found it taken (a create on the host or by another task that the cache
/// did not see), before it gives that `EEXIST` to the caller.
const MAX_RETAKE: u32 = 3;

/// What [`Task::create_for_open`] did.
enum Created {
    /// Made this dentry: the open opens it as created.
    Made(Arc<Dentry>),
    /// The cache has the name now (another task's create): look it up again.
    Cached,
    /// The file system's name was taken (`EEXIST` without `O_EXCL`): look it up again,
    /// at most `MAX_RETAKE` times.
    FsTaken,
}

/// `__O_TMPFILE`: the bit of `O_TMPFILE` besides `O_DIRECTORY`.
pub(crate) const O_TMPFILE_BIT: OpenFlags = OpenFlags::from_bits_retain(0o20000000);

/// `build_open_flags`: the flag checks done before anything else.
///
/// # Errors
/// `EINVAL` for `O_CREAT|O_DIRECTORY` (Linux 6.4+), for `__O_TMPFILE` without
/// `O_DIRECTORY`, and for `O_TMPFILE` without write access (`O_WRONLY`, `O_RDWR` or
/// access mode 3).
fn build_open_flags(flags: OpenFlags) -> Result<()> {
    if flags.contains(OpenFlags::CREAT | OpenFlags::DIRECTORY) {
        return Err(Errno::EINVAL);
    }
    if flags.intersects(O_TMPFILE_BIT)
        && (!flags.contains(OpenFlags::DIRECTORY) || flags.access_mode() == 0)
    {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

impl<V: Variant> Task<V> {
    /// `openat(2)`: opens (and with `O_CREAT` maybe creates) `path`, returns the lowest free
    /// descriptor.
    ///
    /// Supported: access modes, `O_CREAT`, `O_EXCL`, `O_TRUNC`, `O_APPEND`, `O_DIRECTORY`,
    /// `O_NOFOLLOW`, `O_CLOEXEC`, `O_NONBLOCK`, `O_PATH`; `mode & ~umask & 0o7777` for new
    /// files. Other known flags are accepted and ignored, unknown bits ignored, as Linux
    /// `open` does.
    ///
    /// `O_PATH` keeps only `O_DIRECTORY`, `O_NOFOLLOW` and `O_CLOEXEC` of the other flags
    /// (so `O_PATH|O_CREAT` creates nothing) and gives a descriptor that only names the file
    /// ([`FMode::PATH`]): no permission is checked on the file itself (search permission
    /// on the path still is), its atime is not touched, and with `O_NOFOLLOW` a final
    /// symlink is opened itself. `F_GETFL` shows `O_PATH` and the kept flags.
    ///
    /// # Errors
    /// `O_TMPFILE` (`__O_TMPFILE|O_DIRECTORY`) creates an unnamed regular file in directory
    /// `path` (mode as for `O_CREAT`), with link count 0, usable through the descriptor and
    /// freed at its last close; `O_TMPFILE|O_EXCL` makes it unlinkable for good. (Never
    /// `EISDIR`: that is what kernels without `O_TMPFILE` return.)
    ///
    /// # Errors
    /// `EINVAL` (`O_CREAT|O_DIRECTORY` without `O_PATH`; `__O_TMPFILE` without
    /// `O_DIRECTORY`; `O_TMPFILE` with `O_RDONLY`; interior NUL), `ENOTDIR` (`O_TMPFILE` on a
    /// non-directory), `ENAMETOOLONG`, `ENOENT` (missing; empty path; dangling symlink
    /// without `O_CREAT`), `EMFILE` (no descriptor below the limit; checked before the walk,
    /// so nothing is created), `EBADF` (dirfd), `ENOTDIR`, `EISDIR` (directory opened for
    /// writing or with `O_TRUNC`, `O_CREAT` on a directory or a trailing slash), `EEXIST`
    /// (`O_CREAT|O_EXCL` on an existing name, symlinks included), `ELOOP` (`O_NOFOLLOW` on a
    /// symlink; too many symlinks), `EACCES`, `EPERM` (`O_NOATIME` on a file the caller
    /// neither owns nor is root for), `ETXTBSY` (a regular file opened for writing while
    /// an [`open_exec`](Self::open_exec) file of it is open), `EROFS`, `ENXIO`/`EOPNOTSUPP`
    /// (a FIFO, socket or device node, see `mknodat`: uvfs has no pipes, sockets or
    /// drivers; `O_PATH` opens them).
    ///
    /// # References
    /// open(2); Linux `do_sys_openat2`, `path_openat`, `do_open`, `may_open`.
    #[doc(alias = "open")]
    pub fn openat<'a>(
        &self,
        dirfd: impl Into<AtDir<'a>>,
        path: impl AsPath,
        flags: OpenFlags,
        mode: u32,
    ) -> Result<Fd> {
        let dirfd: AtDir<'_> = dirfd.into();
        let flags = build_open_how(flags);
        build_open_flags(flags)?;
        let path = getname(path.path_bytes(), false)?;
        let cloexec = flags.contains(OpenFlags::CLOEXEC);
        let fd = self.fd_table().alloc_fd(0, cloexec)?;
        match self.do_filp_open(dirfd, path, flags, mode) {
            Ok(file) => {
                self.fd_table().fd_install(fd, file);
                Ok(Fd(fd as i32))
            }
            Err(e) => self.open_failed(fd, e, dirfd, path, flags, mode, 0),
        }
    }

    /// After `openat`'s open failed with `e`, the descriptor `fd` reserved: the open
    /// runs again after `ESTALE` ([`open_again`](Self::open_again)) and a file it gets
    /// is installed at `fd`; otherwise `fd` is given back and the error returned. (Apart
    /// from `openat`, so that its common path stays as it was.)
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn open_failed(
        &self,
        fd: u32,
        e: Errno,
        dirfd: AtDir<'_>,
        path: &[u8],
        flags: OpenFlags,
        mode: u32,
        lookup: u32,
    ) -> Result<Fd> {
        match self.open_again(e, dirfd, path, flags, mode, lookup) {
            Ok(file) => {
                self.fd_table().fd_install(fd, file);
                Ok(Fd(fd as i32))
            }
            Err(e) => {
                self.fd_table().put_unused_fd(fd);
                Err(e)
            }
        }
    }

    /// After an open failed with `e`: `retry_estale`. Linux's `do_filp_open` runs
    /// `path_openat` once more with `LOOKUP_REVAL` after `ESTALE` (a hostfs file unlinked
    /// by another task between the walk and the file system's open, an NFS-style server's
    /// stale handle; the file system that answered ESTALE marked its entry for
    /// revalidation); here at most `MAX_ESTALE_RETRIES` times. Any other error is
    /// returned as it is.
    #[cold]
    #[inline(never)]
    fn open_again(
        &self,
        e: Errno,
        dirfd: AtDir<'_>,
        path: &[u8],
        flags: OpenFlags,
        mode: u32,
        lookup: u32,
    ) -> Result<FileHandle<V>> {
        crate::namei::retry_estale(Err(e), || {
            self.do_filp_open_lookup(dirfd, path, flags, mode, lookup)
        })
    }

    /// `open(2)`: `openat(AT_FDCWD, ..)`.
    pub fn open(&self, path: impl AsPath, flags: OpenFlags, mode: u32) -> Result<Fd> {
        self.openat(Fd::AT_FDCWD, path, flags, mode)
    }

    /// Opens `path` and returns the file without installing a descriptor (`filp_open`).
    ///
    /// # Errors
    /// As [`openat`](Self::openat), without `EMFILE`.
    pub fn filp_open<'a>(
        &self,
        dirfd: impl Into<AtDir<'a>>,
        path: impl AsPath,
        flags: OpenFlags,
        mode: u32,
    ) -> Result<FileHandle<V>> {
        let dirfd: AtDir<'_> = dirfd.into();
        let flags = build_open_how(flags);
        build_open_flags(flags)?;
        let path = getname(path.path_bytes(), false)?;
        match self.do_filp_open(dirfd, path, flags, mode) {
            Err(e) => self.open_again(e, dirfd, path, flags, mode, 0),
            r => r,
        }
    }

    fn do_filp_open(
        &self,
        dirfd: AtDir<'_>,
        path: &[u8],
        flags: OpenFlags,
        mode: u32,
    ) -> Result<FileHandle<V>> {
        self.do_filp_open_lookup(dirfd, path, flags, mode, 0)
    }

    /// `do_filp_open` with `LOOKUP_*` restrictions `lookup` (openat2's `resolve`); the
    /// callers run it again after `ESTALE` ([`open_again`](Self::open_again)).
    fn do_filp_open_lookup(
        &self,
        dirfd: AtDir<'_>,
        path: &[u8],
        flags: OpenFlags,
        mode: u32,
        lookup: u32,
    ) -> Result<FileHandle<V>> {
        if flags.contains(OpenFlags::PATH) {
            return self.do_o_path(dirfd, path, flags, lookup);
        }
        // vfs_prepare_mode: set-group-ID is stripped (mode_strip_sgid) from the mode as
        // given, before the umask.
        let raw_mode = mode & 0o7777;
        let mode = raw_mode & !self.current_umask();
        if flags.intersects(O_TMPFILE_BIT) {
            return self.do_tmpfile(dirfd, path, flags, raw_mode, lookup);
        }
        if flags.contains(OpenFlags::CREAT) {
            return self.open_creat(dirfd, path, flags, (mode, raw_mode), lookup);
        }
        let p = self.with_walk_flags(dirfd, path, lookup, |nd, start| {
            let d = nd.walk(
                start,
                path,
                !flags.contains(OpenFlags::NOFOLLOW),
                flags.contains(OpenFlags::DIRECTORY),
            )?;
            nd.path_of(d.clone())
        })?;
        self.do_open(p, flags, false)
    }

    /// `open(O_CREAT)`'s walk (`open_last_lookups` + `lookup_open`) and open: the name is
    /// opened, or created and opened as created. In a walk that leaves its pin for a file
    /// system that may block (`Nameidata::unlazy`), a create in a directory of such a file
    /// system is made after the walk, unpinned, the parent counted
    /// ([`create_after_walk`](Self::create_after_walk)).
    fn open_creat(
        &self,
        dirfd: AtDir<'_>,
        path: &[u8],
        flags: OpenFlags,
        (mode, raw_mode): (u32, u32),
        lookup: u32,
    ) -> Result<FileHandle<V>> {
        // A create the walk left to make after it: the parent and the name.
        let mut later = None;
        match self.creat_walk(dirfd, path, flags, (mode, raw_mode), lookup, &mut later) {
            Ok((p, created)) => self.do_open(p, flags, created),
            Err(e) => {
                self.create_after_walk(e, later, dirfd, path, flags, (mode, raw_mode), lookup)
            }
        }
    }

    /// [`open_creat`](Self::open_creat)'s walk: the file `path` names, and whether this
    /// call created it. A create left for after the walk puts its parent (counted) and
    /// name in `later` and returns `EAGAIN`.
    #[inline(always)]
    fn creat_walk(
        &self,
        dirfd: AtDir<'_>,
        path: &[u8],
        flags: OpenFlags,
        (mode, raw_mode): (u32, u32),
        lookup: u32,
        later: &mut Option<(Path, Vec<u8>)>,
    ) -> Result<(Path, bool)> {
        self.with_walk_flags(dirfd, path, lookup, |nd, start| {
            let (d, created) = {
                let mut start = start;
                let mut path: &[u8] = path;
                // Creates that found the name taken (see below), at most `MAX_RETAKE`.
                let mut retaken = 0;
                loop {
                    let last = nd.walk_parent(start, path)?;
                    if last.ty != LastType::Norm {
                        // `.`, `..`, `/` exist and are directories (Linux `do_open`:
                        // O_EXCL's EEXIST is checked before EISDIR).
                        return Err(if flags.contains(OpenFlags::EXCL) {
                            Errno::EEXIST
                        } else {
                            Errno::EISDIR
                        });
                    }
                    if last.trailing_slash {
                        // `open_last_lookups`: O_CREAT with a trailing slash.
                        return Err(Errno::EISDIR);
                    }
                    if last.name.len() > NAME_MAX {
                        return Err(Errno::ENAMETOOLONG);
                    }
                    if last.dir.dir().is_none() {
                        return Err(Errno::ENOTDIR);
                    }
                    // Fast path: an existing name needs no directory lock (as Linux's
                    // lookup_open with a positive cached dentry).
                    let found = match nd.lookup_cached(last.dir, last.name)? {
                        Some(d) => Some(d),
                        // The create may block (a FUSE CREATE, the host's open): made after
                        // the walk, unpinned, the parent counted (`Unlazy`'s reason).
                        None if nd.unlazy.is_some() && last.dir.d_inode.needs_revalidate() => {
                            *later = Some((nd.path(last.dir)?, last.name.to_vec()));
                            return Err(Errno::EAGAIN);
                        }
                        None => match self
                            .create_for_open(last.mnt, last.dir, last.name, flags, mode, raw_mode)?
                        {
                            Created::Made(d) => break (Some(d), true),
                            // Raced with a create: retry lockless, without a lookup this
                            // call kept (it said "none").
                            Created::Cached => {
                                nd.forget_lookup(last.dir, last.name);
                                None
                            }
                            Created::FsTaken if retaken < MAX_RETAKE => {
                                retaken += 1;
                                nd.forget_lookup(last.dir, last.name);
                                continue;
                            }
                            Created::FsTaken => return Err(Errno::EEXIST),
                        },
                    };
                    let Some(d) = found else { continue };
                    let d = nd.follow_mounts(d)?;
                    if flags.contains(OpenFlags::EXCL) {
                        return Err(Errno::EEXIST);
                    }
                    // Linux's `do_open` runs `may_create_in_sticky` on an existing target (not
                    // followed, not a directory): in a sticky world-writable directory, an
                    // entry that is neither a regular file nor a FIFO (protected_regular and
                    // protected_fifos at their default 0), owned by neither the directory's
                    // owner nor the caller, is EACCES, even for root.
                    let sticky_denied = || {
                        let (dm, du) = (last.dir.d_inode.mode(), last.dir.d_inode.uid());
                        let i = &d.d_inode;
                        let fifo = i.mode() & S_IFMT == S_IFIFO;
                        dm & (S_ISVTX | 0o002) == S_ISVTX | 0o002
                            && !i.is_reg()
                            && !fifo
                            && i.uid() != du
                            && i.uid() != nd.cred.uid
                    };
                    if d.d_inode.is_symlink() {
                        if flags.contains(OpenFlags::NOFOLLOW) {
                            return Err(if sticky_denied() {
                                Errno::EACCES
                            } else {
                                Errno::ELOOP
                            });
                        }
                        nd.count_link()?;
                        // Following it stamps its atime, as any walk does (`pick_link`).
                        d.d_inode.touch_atime();
                        let body = nd.link_body(d)?;
                        if body.is_empty() {
                            return Err(Errno::ENOENT);
                        }
                        start = last.dir;
                        path = body;
                        continue;
                    }
                    if d.d_inode.is_dir() {
                        return Err(Errno::EISDIR);
                    }
                    if sticky_denied() {
                        return Err(Errno::EACCES);
                    }
                    break (Some(d.clone()), false);
                }
            };
            let d: Arc<Dentry> = d.ok_or(Errno::ENOENT)?;
            Ok((nd.path_of(d)?, created))
        })
    }

    /// After [`creat_walk`](Self::creat_walk) failed with `e`: when it left a create to
    /// make (`later`: in a directory whose file system may block, the walk having left its
    /// epoch pin, `Unlazy`), makes it, unpinned, the parent counted, and opens the new
    /// file; when the name was taken meanwhile, walks again. Otherwise `e`.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn create_after_walk(
        &self,
        mut e: Errno,
        mut later: Option<(Path, Vec<u8>)>,
        dirfd: AtDir<'_>,
        path: &[u8],
        flags: OpenFlags,
        (mode, raw_mode): (u32, u32),
        lookup: u32,
    ) -> Result<FileHandle<V>> {
        // Creates after the walk that found the name taken (see `create_for_open`).
        let mut retaken = 0;
        while let Some((parent, name)) = later.take() {
            match self.create_for_open(&parent.mnt, &parent.dentry, &name, flags, mode, raw_mode)? {
                Created::Made(d) => {
                    let p = Path {
                        mnt: parent.mnt,
                        dentry: d,
                    };
                    return self.do_open(p, flags, true);
                }
                // Raced with a create: the walk again finds the name.
                Created::Cached => {}
                Created::FsTaken if retaken < MAX_RETAKE => retaken += 1,
                Created::FsTaken => return Err(Errno::EEXIST),
            }
            match self.creat_walk(dirfd, path, flags, (mode, raw_mode), lookup, &mut later) {
                Ok((p, created)) => return self.do_open(p, flags, created),
                Err(err) => e = err,
            }
        }
        Err(e)
    }

    /// `lookup_open`'s create for `open(O_CREAT)` of `name` in `parent` (on `mnt`), where
    /// the walk found no entry: under the name's directory lock, the checks and the file
    /// system's create (`create_locked`). `mode` is after the umask, `raw_mode` as given.
    ///
    /// # Errors
    /// `ENOTDIR` (`parent` not a directory), `ENOENT` (a removed directory), `EROFS`,
    /// `EACCES`, `EEXIST` (with `O_EXCL`), `create_locked`'s.
    #[inline(never)]
    fn create_for_open(
        &self,
        mnt: &crate::mount::Mount,
        parent: &Arc<Dentry>,
        name: &[u8],
        flags: OpenFlags,
        mode: u32,
        raw_mode: u32,
    ) -> Result<Created> {
        let dir = parent.dir().ok_or(Errno::ENOTDIR)?;
        let dir_inode = &parent.d_inode;
        let mut dl = dir.lock_name(name);
        if dl.get(name).is_some() {
            return Ok(Created::Cached);
        }
        if dl.dead() {
            return Err(Errno::ENOENT);
        }
        // lookup_open: without write access to the mount the create error is EROFS
        // (may_o_create is not run).
        mnt.want_write()?;
        dir_inode.permission(&self.cred, MAY_WRITE | crate::cred::MAY_EXEC)?;
        let m = mode & mode_strip_sgid(&self.cred, dir_inode, raw_mode);
        // The open's flags, as `atomic_open` gets them (lookup_open: O_EXCL makes O_TRUNC
        // moot).
        let mut of = creating_open_flags(flags);
        if flags.contains(OpenFlags::EXCL) {
            of -= OpenFlags::TRUNC;
        }
        let last = Last {
            mnt,
            dir: parent,
            name,
            ty: LastType::Norm,
            trailing_slash: false,
        };
        match create_locked(self, &last, &mut dl, S_IFREG | m, (0, None), of) {
            // The file system's name was taken since the lookup, by a change the cache did
            // not see (on the host, or by a task in a directory that caches nothing,
            // `d_add`): without O_EXCL the file is opened, as any open of an existing name.
            // hostfs creates exclusively; a bound on the retries (`MAX_RETAKE`) keeps a file
            // system that says both "missing" and "exists" from looping.
            Err(Errno::EEXIST) if !flags.contains(OpenFlags::EXCL) => Ok(Created::FsTaken),
            r => r.map(Created::Made),
        }
    }

    /// `do_o_path`: `O_PATH` opens the walked dentry as is (a symlink too with
    /// `O_NOFOLLOW`), checking no permission on it (`do_dentry_open`'s `O_PATH` case).
    /// `flags` went through `build_open_how`.
    fn do_o_path(
        &self,
        dirfd: AtDir<'_>,
        path: &[u8],
        flags: OpenFlags,
        lookup: u32,
    ) -> Result<FileHandle<V>> {
        let p = self.with_walk_flags(dirfd, path, lookup, |nd, start| {
            let follow = !flags.contains(OpenFlags::NOFOLLOW);
            let d = nd.walk(start, path, follow, flags.contains(OpenFlags::DIRECTORY))?;
            nd.path(d)
        })?;
        File::open_handle(p, FMode::PATH, flags - OpenFlags::CLOEXEC, self.cred_id)
    }

    /// `do_tmpfile` + `vfs_tmpfile` + `shmem_tmpfile`: an unnamed regular file in directory
    /// `path` (followed unless `O_NOFOLLOW`), link count 0, freed when its last open file
    /// goes; linkable by `linkat(AT_EMPTY_PATH)` unless `O_EXCL` (`I_LINKABLE`). `raw_mode`
    /// is the permission bits as given (the umask is applied here, after
    /// `mode_strip_sgid`). The directory is not changed (no entry, no times). On a mount
    /// with limits the inode and its pages are charged as any file's (`ENOSPC`).
    fn do_tmpfile(
        &self,
        dirfd: AtDir<'_>,
        path: &[u8],
        flags: OpenFlags,
        raw_mode: u32,
        lookup: u32,
    ) -> Result<FileHandle<V>> {
        let dirp = self.with_walk_flags(dirfd, path, lookup, |nd, start| {
            let follow = !flags.contains(OpenFlags::NOFOLLOW);
            let d = nd.walk(start, path, follow, true)?;
            nd.path(d)
        })?;
        let dir = &dirp.dentry;
        let di = &dir.d_inode;
        // do_tmpfile: mnt_want_write before vfs_tmpfile's permission check.
        dirp.mnt.want_write()?;
        di.permission(&self.cred, MAY_WRITE | crate::cred::MAY_EXEC)?;
        // vfs_prepare_mode (mode_strip_sgid, then the umask) + inode_init_owner, as for a
        // named file (`create_locked`).
        let mode = mode_strip_sgid(&self.cred, di, raw_mode) & !self.current_umask();
        let (gid, mode) = inode_init_owner(&self.cred, di, S_IFREG | mode, false);
        let args = crate::fs::NewInode {
            mode,
            uid: self.cred.uid,
            gid,
            rdev: 0,
            target: None,
            now: crate::time::coarse_now(),
            open: creating_open_flags(flags),
        };
        // `->tmpfile` (tmpfs: ENOSPC past the mount's limits).
        let inode = crate::namei::new_inode(&dirp.mnt, di, b"", args)?;
        inode.init_tmpfile(!flags.contains(OpenFlags::EXCL));
        // d_tmpfile: a dentry under the directory named `#<inode number>` (what
        // /proc/PID/fd/N shows, with " (deleted)"), never hashed (no lookup finds it).
        let name = format!("#{}", inode.i_ino);
        let d = Dentry::new_arc(inode, Some(dir), Arc::from(name.as_bytes()), 0);
        crate::namei::d_delete(&d);
        // may_open with no access to check: O_NOATIME is the creator's own file.
        let p = Path {
            mnt: dirp.mnt.clone(),
            dentry: d,
        };
        self.do_open(p, flags, true)
    }

    /// `do_open` + `may_open` + `vfs_open`: checks access to the looked-up file and builds
    /// the `File`. A failed open of the file it `created` gives back what the create
    /// prepared for the open (`FileOps::release_created`).
    fn do_open(&self, p: Path, flags: OpenFlags, created: bool) -> Result<FileHandle<V>> {
        // Only a file system whose inodes revalidate (the FUSE client) prepares anything
        // at create: tmpfs's creating opens take no extra inode reference.
        let keep = created && p.dentry.d_inode.needs_revalidate();
        let inode = keep.then(|| p.dentry.d_inode.clone());
        let r = self.do_open_checked(p, flags, created);
        if let (Err(_), Some(inode)) = (&r, inode) {
            inode.i_op.release_created(&inode);
        }
        r
    }

    /// [`do_open`](Self::do_open)'s checks and the `File`.
    fn do_open_checked(
        &self,
        mut p: Path,
        flags: OpenFlags,
        created: bool,
    ) -> Result<FileHandle<V>> {
        let inode = &p.dentry.d_inode;
        // The file type, read once: it never changes (`chmod` changes only the other bits).
        let ifmt = inode.mode() & S_IFMT;
        let (is_reg, is_dir) = (ifmt == S_IFREG, ifmt == S_IFDIR);
        let acc = flags.access_mode();
        let mut acc_mode = match acc {
            0 => MAY_READ,
            1 => MAY_WRITE,
            _ => MAY_READ | MAY_WRITE,
        };
        if flags.contains(OpenFlags::TRUNC) {
            acc_mode |= MAY_WRITE;
        }
        // O_TMPFILE carries O_DIRECTORY for the directory it was created in.
        if flags.contains(OpenFlags::DIRECTORY) && !is_dir && !flags.intersects(O_TMPFILE_BIT) {
            return Err(Errno::ENOTDIR);
        }
        // do_open: O_TRUNC of an existing regular file needs write access to the mount
        // before may_open's checks.
        if flags.contains(OpenFlags::TRUNC) && is_reg && !created {
            p.mnt.want_write()?;
        }
        if ifmt == S_IFLNK {
            return Err(Errno::ELOOP);
        }
        if is_dir && acc_mode & MAY_WRITE != 0 {
            return Err(Errno::EISDIR);
        }
        // may_open: device nodes on a `nodev` mount.
        if matches!(ifmt, S_IFCHR | S_IFBLK) && p.mnt.flags().contains(MountFlags::NODEV) {
            return Err(Errno::EACCES);
        }
        if !created {
            inode.permission(&self.cred, acc_mode)?;
        }
        // may_open: O_NOATIME only for the owner or CAP_FOWNER (a file just created is the
        // caller's own).
        if flags.contains(OpenFlags::NOATIME) && !self.cred.owner_or_capable(inode.uid()) {
            return Err(Errno::EPERM);
        }
        // OPEN_FMODE: access mode 3 grants neither read nor write.
        let mut fmode = FMode::LSEEK | FMode::PREAD | FMode::PWRITE;
        if created {
            fmode |= FMode::CREATED;
        }
        if acc == 0 || acc == 2 {
            fmode |= FMode::READ;
        }
        if acc == 1 || acc == 2 {
            fmode |= FMode::WRITE;
        }
        // do_dentry_open -> file_get_write_access: a regular file opened for writing takes
        // a write count on the inode (ETXTBSY while it runs), then on the mount (EROFS on
        // a read-only one), before the file type's open.
        if fmode.contains(FMode::WRITE) && is_reg {
            inode.get_write_access()?;
            if let Err(e) = p.mnt.get_write_access() {
                inode.put_write_access();
                return Err(e);
            }
            p.mnt.absorb(crate::sync::pcp_ref::WRITER);
            fmode |= FMode::WRITER;
        }
        // vfs_open -> the file type's `open`.
        if !is_reg && !is_dir {
            return Err(special_open_errno(inode.mode(), flags));
        }
        let truncate = flags.contains(OpenFlags::TRUNC) && is_reg && !created;
        // FUSE_ATOMIC_O_TRUNC: the file system's open truncates (it sees O_TRUNC).
        let atomic = truncate && inode.i_op.atomic_o_trunc(inode);
        // A file system that truncates in its `open` must be called to open.
        debug_assert!(!atomic || inode.wants_open());
        // build_open_flags drops unknown bits and O_CLOEXEC; do_dentry_open drops the
        // open-time-only flags.
        let stored = (flags & VALID_OPEN_FLAGS)
            - (OpenFlags::CREAT
                | OpenFlags::EXCL
                | OpenFlags::NOCTTY
                | OpenFlags::TRUNC
                | OpenFlags::CLOEXEC);
        // The file first (it can fail only with an ablation variant's ENFILE), then the
        // truncation, so that a failed open leaves the data alone.
        let trunc = if atomic {
            OpenFlags::TRUNC
        } else {
            OpenFlags::empty()
        };
        let file = File::open_handle(
            p,
            fmode,
            stored | OpenFlags::LARGEFILE | trunc,
            self.cred_id,
        )?;
        if atomic {
            // `handle_truncate`'s write count still comes after the open (ETXTBSY for an
            // `O_RDONLY|O_TRUNC` open of a running file, the server having truncated it:
            // Linux's order); `do_truncate` drops a file capability, and
            // `fuse_do_setattr` returns at `ATTR_OPEN` without a request.
            let inode = file.inode();
            if fmode.contains(FMode::WRITER) {
                inode.kill_priv()?;
            } else {
                inode.with_write_access(|| inode.kill_priv())?;
            }
        } else if truncate {
            // `handle_truncate`: a write count for the truncation (ETXTBSY for an
            // `O_RDONLY|O_TRUNC` open of a running file; a file open for writing holds
            // one already, which keeps any exec open out), then `do_truncate`: as
            // ftruncate, the set-ID bits go first.
            let inode = file.inode();
            let trunc = || {
                let now = crate::time::coarse_now();
                inode.kill_suid_truncate(&self.cred, now)?;
                // No handle: `fuse_do_setattr` sends an `ATTR_OPEN` truncation without
                // `FATTR_FH` (the file may be open read-only).
                inode.truncate_at(0, now, true, None)
            };
            if fmode.contains(FMode::WRITER) {
                trunc()?;
            } else {
                inode.with_write_access(trunc)?;
            }
        }
        Ok(file)
    }

    /// `dentry_open`: opens the file `d` names, as `openat` would after its walk (the
    /// access check, `O_TRUNC`, `O_NOATIME`, `O_PATH`, ...; `O_CREAT`, `O_EXCL` and
    /// `O_TMPFILE` are refused with `EINVAL`: there is no name to create). For callers that
    /// hold a dentry rather than a path, such as the FUSE server's `open` of a node.
    ///
    /// # Errors
    /// `EINVAL` (`O_CREAT`, `O_EXCL`, `O_TMPFILE`, or as `openat`), `EXDEV` (a dentry of
    /// another namespace), and `openat`'s errors after the walk: `EACCES`, `EISDIR`,
    /// `ENOTDIR` (`O_DIRECTORY`), `ELOOP` (a symlink), `EPERM` (`O_NOATIME`),
    /// `ENXIO`/`EOPNOTSUPP` (special files).
    ///
    /// # References
    /// Linux `dentry_open`, `vfs_open` (fs/open.c).
    pub fn dentry_open(&self, d: &Arc<Dentry>, flags: OpenFlags) -> Result<FileHandle<V>> {
        let flags = build_open_how(flags);
        build_open_flags(flags)?;
        if flags.intersects(OpenFlags::CREAT | OpenFlags::EXCL | O_TMPFILE_BIT) {
            return Err(Errno::EINVAL);
        }
        let p = self.dentry_path(d)?;
        if flags.contains(OpenFlags::PATH) {
            // As `openat`'s walk with O_DIRECTORY (`LOOKUP_DIRECTORY`), which `do_open`
            // checks for the other opens.
            if flags.contains(OpenFlags::DIRECTORY) && !d.d_inode.is_dir() {
                return Err(Errno::ENOTDIR);
            }
            return File::open_handle(p, FMode::PATH, flags - OpenFlags::CLOEXEC, self.cred_id);
        }
        self.do_open(p, flags, false)
    }

    /// `d` with the mount of this task's namespace it is in.
    ///
    /// # Errors
    /// `EXDEV` unless `d` is a dentry of this task's namespace.
    fn dentry_path(&self, d: &Arc<Dentry>) -> Result<Path> {
        // No walk and no descriptor: this call's caller for a file system (the opens of
        // `dentry_open`, `dentry_open_exec`).
        crate::cred::set_caller(&self.cred);
        let guard = crate::sync::epoch::pin();
        let m = self.fs.ns.mount_of(d, &guard).ok_or(Errno::EXDEV)?;
        Ok(Path {
            mnt: m.get_ref(crate::sync::pcp_ref::REF, &guard)?,
            dentry: d.clone(),
        })
    }

    /// The open of `execve(2)` on the file `d` names: read-only, checked for execute
    /// permission alone (a `0711` program runs for users who may not read it), and only for
    /// a regular file. For callers that hold a dentry, such as the FUSE server's `open` with
    /// `__FMODE_EXEC`.
    ///
    /// # Errors
    /// `EACCES` (no execute permission, or not a regular file: a directory, a special file),
    /// `ELOOP` (a symlink), `EACCES` (a `noexec` mount: the first mount of the dentry's file
    /// system in this namespace whose tree holds it; see [`open_exec`](Self::open_exec) for the
    /// path's own), `EXDEV` (a dentry of another namespace).
    ///
    /// Unlike [`open_exec`](Self::open_exec), the file does not deny writing: the FUSE
    /// server's caller, the kernel, denies it on its own inode while the program runs, and
    /// its `RELEASE` of the exec open comes asynchronously after the program ends, so a
    /// denial held here would make an open for writing right after the exit `ETXTBSY`.
    ///
    /// # References
    /// execve(2); Linux `do_open_execat` (fs/exec.c: `acc_mode = MAY_EXEC`), `may_open`.
    pub fn dentry_open_exec(&self, d: &Arc<Dentry>) -> Result<FileHandle<V>> {
        let p = self.dentry_path(d)?;
        self.open_exec_path(p, false)
    }

    /// `do_open_execat`: the open of `execve(2)` of `path` (relative to `dirfd`, symlinks
    /// followed), checked as [`dentry_open_exec`](Self::dentry_open_exec) on the mount the
    /// walk ended in (so a `noexec` bind of an executable mount refuses, and an executable
    /// bind of a `noexec` one allows).
    ///
    /// The file returned denies writing ([`FMode::EXEC`]) until its last close: while it
    /// is open, opens for writing and `truncate` of the file are `ETXTBSY` (hold it as long
    /// as the program runs, as Linux's `mm->exe_file`).
    ///
    /// # Errors
    /// The walk's (`ENOENT`, `ENOTDIR`, `EACCES`, `ELOOP`, `ENAMETOOLONG`, `EBADF`), then
    /// those of [`dentry_open_exec`](Self::dentry_open_exec), then `ETXTBSY` (the file is
    /// open for writing).
    ///
    /// # References
    /// execve(2); Linux `do_open_execat`, `exe_file_deny_write_access`.
    pub fn open_exec<'a>(
        &self,
        dirfd: impl Into<AtDir<'a>>,
        path: impl AsPath,
    ) -> Result<FileHandle<V>> {
        let path = getname(path.path_bytes(), false)?;
        let p = self.with_walk(dirfd.into(), path, |nd, start| {
            let d = nd.walk(start, path, true, false)?;
            nd.path(d)
        })?;
        self.open_exec_path(p, true)
    }

    /// The checks and the open of an exec open of `p`.
    fn open_exec_path(&self, p: Path, deny: bool) -> Result<FileHandle<V>> {
        let inode = &p.dentry.d_inode;
        if inode.is_symlink() {
            return Err(Errno::ELOOP);
        }
        // may_open: MAY_EXEC on a `noexec` mount.
        if p.mnt.flags().contains(MountFlags::NOEXEC) {
            return Err(Errno::EACCES);
        }
        // may_open: MAY_EXEC of anything but a regular file.
        if !inode.is_reg() {
            return Err(Errno::EACCES);
        }
        inode.permission(&self.cred, crate::cred::MAY_EXEC)?;
        // do_open_execat: writers keep the file from running (ETXTBSY), and while this
        // file is open nobody may open it for writing.
        let mut mode = FMode::READ | FMode::LSEEK | FMode::PREAD | FMode::PWRITE;
        if deny {
            inode.deny_write_access()?;
            mode |= FMode::EXEC;
        }
        File::open_handle(
            p,
            mode,
            OpenFlags::RDONLY | OpenFlags::LARGEFILE,
            self.cred_id,
        )
    }

    /// Installs `file` at the lowest free descriptor (for handles from
    /// [`filp_open`](Self::filp_open)).
    ///
    /// # Errors
    /// `EMFILE`.
    pub fn install_file(&self, file: FileHandle<V>, cloexec: bool) -> Result<Fd> {
        self.fd_table()
            .install(file, 0, cloexec)
            .map(|fd| Fd(fd as i32))
    }

    /// `close(2)`.
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open.
    ///
    /// # References
    /// close(2); Linux `close_fd`, `file_close_fd`, `filp_close`.
    pub fn close(&self, fd: Fd) -> Result<()> {
        // The caller of the file system's `flush` (FUSE: FLUSH's header).
        crate::cred::set_caller(&self.cred);
        self.fd_table().close_fd(fd.0)
    }

    /// `dup(2)`: the lowest free descriptor, referring to the same open file.
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open; `EMFILE` if no descriptor is free below the limit.
    pub fn dup(&self, fd: Fd) -> Result<Fd> {
        self.fd_table()
            .dup_from(fd.0, 0, false)
            .map(|fd| Fd(fd as i32))
    }

    /// `dup2(2)`: makes `newfd` refer to `oldfd`'s open file, closing `newfd` first;
    /// `oldfd == newfd` returns `newfd` if it is open. Clears close-on-exec on `newfd`.
    ///
    /// # Errors
    /// `EBADF` (`oldfd` not open, `newfd` negative or at/above the limit), `EBUSY` (`newfd`
    /// reserved by a concurrent open).
    pub fn dup2(&self, oldfd: Fd, newfd: Fd) -> Result<Fd> {
        if oldfd == newfd {
            // Validity only: `fdget` takes no reference on a private table.
            drop(self.fdget_raw(oldfd)?);
            return Ok(newfd);
        }
        self.fd_table().dup2(oldfd.0, newfd.0, false).map(Fd)
    }

    /// `dup3(2)`: as `dup2` but `oldfd == newfd` is `EINVAL` and `O_CLOEXEC` may be given.
    ///
    /// # Errors
    /// `EINVAL` (flags other than `O_CLOEXEC`; `oldfd == newfd`), else as `dup2`.
    pub fn dup3(&self, oldfd: Fd, newfd: Fd, flags: OpenFlags) -> Result<Fd> {
        if !(flags - OpenFlags::CLOEXEC).is_empty() || oldfd == newfd {
            return Err(Errno::EINVAL);
        }
        self.files
            .dup2(oldfd.0, newfd.0, flags.contains(OpenFlags::CLOEXEC))
            .map(Fd)
    }

    /// `fcntl(2)` for descriptor and status-flag commands. Returns the command's result
    /// (new fd, flags, or 0). Record locks: [`fcntl_lock`](Self::fcntl_lock).
    ///
    /// # Errors
    /// `EBADF` (`fd` not open; `F_SETFL` on an `O_PATH` descriptor), `EINVAL` (`F_DUPFD` argument negative or at/above the
    /// limit), `EMFILE` (no free descriptor), `EPERM` (`F_SETFL` turning `O_NOATIME` on for
    /// a file the caller neither owns nor is root for).
    ///
    /// # References
    /// fcntl(2); Linux `do_fcntl`, `f_dupfd`, `setfl`.
    pub fn fcntl(&self, fd: Fd, cmd: Fcntl) -> Result<i32> {
        match cmd {
            Fcntl::DupFd(min) | Fcntl::DupFdCloexec(min) => {
                // EBADF before EINVAL, as Linux (`fdget_raw` before `f_dupfd`).
                drop(self.fdget_raw(fd)?);
                let min = u32::try_from(min).map_err(|_| Errno::EINVAL)?;
                if min >= self.files.rlimit() {
                    return Err(Errno::EINVAL);
                }
                let cloexec = matches!(cmd, Fcntl::DupFdCloexec(_));
                self.fd_table()
                    .dup_from(fd.0, min, cloexec)
                    .map(|n| n as i32)
            }
            Fcntl::GetFd => Ok(if self.fd_table().get_cloexec(fd.0)? {
                FD_CLOEXEC
            } else {
                0
            }),
            Fcntl::SetFd(arg) => self
                .fd_table()
                .set_cloexec(fd.0, arg & FD_CLOEXEC != 0)
                .map(|_| 0),
            Fcntl::GetFl => {
                let f = self.fdget_raw(fd)?;
                Ok(f.flags().bits() as i32)
            }
            Fcntl::SetFl(arg) => {
                let f = self.fdget(fd)?;
                let old = f.flags().bits();
                // setfl: turning O_NOATIME on is for the owner or CAP_FOWNER only.
                let noatime = OpenFlags::NOATIME.bits();
                if arg & noatime != 0
                    && old & noatime == 0
                    && !self.cred.owner_or_capable(f.inode().uid())
                {
                    return Err(Errno::EPERM);
                }
                let new = (arg & SETFL_MASK) | (old & !SETFL_MASK);
                if new != old {
                    f.set_flags(OpenFlags::from_bits_retain(new));
                }
                Ok(0)
            }
        }
    }

    /// `close_range(2)`: closes (or with `CLOSE_RANGE_CLOEXEC` marks close-on-exec) every
    /// open descriptor in `first ..= last`; `CLOSE_RANGE_UNSHARE` first gives this task a
    /// private copy of a shared table.
    ///
    /// Takes `&mut self`, unlike the other calls: with `CLOSE_RANGE_UNSHARE` it replaces the
    /// task's own table pointer, which every descriptor call reads as a plain field (no
    /// lock, no atomic load); a `Task` belongs to one thread, so the exclusive borrow costs
    /// its owner nothing.
    ///
    /// # Errors
    /// `EINVAL` for unknown flags or `first > last`.
    pub fn close_range(&mut self, first: u32, last: u32, flags: u32) -> Result<()> {
        if flags & !(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC) != 0 || first > last {
            return Err(Errno::EINVAL);
        }
        if flags & CLOSE_RANGE_UNSHARE != 0 {
            self.unshare_files();
        }
        if flags & CLOSE_RANGE_CLOEXEC != 0 {
            self.fd_table().set_cloexec_range(first, last);
        } else {
            self.fd_table().close_range(first, last);
        }
        Ok(())
    }

    /// The file-descriptor part of `execve`: unshares the fd table and closes every
    /// close-on-exec descriptor (`do_close_on_exec`). `&mut self` for the reason given at
    /// [`close_range`](Self::close_range): the unshare replaces the task's table pointer.
    pub fn exec(&mut self) {
        self.unshare_files();
        self.fd_table().close_on_exec();
    }
}

/// `openat2` `resolve` flag: crossing a mount (into one, or out of one with `..`, or to a
/// root on another mount) is `EXDEV`.
pub const RESOLVE_NO_XDEV: u64 = 0x01;
/// `openat2` `resolve` flag: no magic links (`/proc/self/fd/N`); uvfs has none: accepted.
pub const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
/// `openat2` `resolve` flag: following any symlink is `ELOOP` (a final one not followed
/// because of `O_NOFOLLOW` is no error: `O_PATH|O_NOFOLLOW` opens it).
pub const RESOLVE_NO_SYMLINKS: u64 = 0x04;
/// `openat2` `resolve` flag: the walk must stay under `dirfd`: an absolute path or
/// symlink, or `..` at `dirfd`, is `EXDEV`.
pub const RESOLVE_BENEATH: u64 = 0x08;
/// `openat2` `resolve` flag: `dirfd` is the root of the walk: `..` stops there, absolute
/// paths and symlinks start there.
pub const RESOLVE_IN_ROOT: u64 = 0x10;
/// `openat2` `resolve` flag: only from the dentry cache; everything of a tmpfs is cached,
/// so only opens that would change something (`O_CREAT`, `O_TRUNC`, `O_TMPFILE`) are
/// `EAGAIN`.
pub const RESOLVE_CACHED: u64 = 0x20;
const VALID_RESOLVE_FLAGS: u64 = 0x3f;

bitflags::bitflags! {
    /// `openat2(2)` `resolve` flags (`RESOLVE_*`, include/uapi/linux/openat2.h), typed:
    /// [`OpenHow::new`] takes them; the raw [`OpenHow::resolve`] field holds their bits.
    #[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
    pub struct ResolveFlags: u64 {
        /// [`RESOLVE_NO_XDEV`].
        const NO_XDEV = RESOLVE_NO_XDEV;
        /// [`RESOLVE_NO_MAGICLINKS`].
        const NO_MAGICLINKS = RESOLVE_NO_MAGICLINKS;
        /// [`RESOLVE_NO_SYMLINKS`].
        const NO_SYMLINKS = RESOLVE_NO_SYMLINKS;
        /// [`RESOLVE_BENEATH`].
        const BENEATH = RESOLVE_BENEATH;
        /// [`RESOLVE_IN_ROOT`].
        const IN_ROOT = RESOLVE_IN_ROOT;
        /// [`RESOLVE_CACHED`].
        const CACHED = RESOLVE_CACHED;
    }
}

/// The `openat2(2)` argument (`struct open_how`): open flags, creation mode, `RESOLVE_*`.
///
/// The fields are the raw 64-bit words of the system call (so that a caller can pass
/// what a C program would, unknown bits included, and get its `EINVAL`); [`OpenHow::new`]
/// builds one from typed values.
/// ```
/// use uvfs::open::{OpenHow, ResolveFlags};
/// use uvfs::{Fd, OpenFlags};
/// let task = uvfs::Task::init(&uvfs::tmpfs::mount(Default::default()));
/// let how = OpenHow::new(OpenFlags::CREAT | OpenFlags::WRONLY, 0o644, ResolveFlags::BENEATH);
/// task.openat2(Fd::AT_FDCWD, "f", &how)?;
/// let escape = OpenHow::new(OpenFlags::RDONLY, 0, ResolveFlags::BENEATH);
/// assert_eq!(task.openat2(Fd::AT_FDCWD, "/f", &escape), Err(uvfs::Errno::EXDEV));
/// # Ok::<(), uvfs::Errno>(())
/// ```
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenHow {
    /// `O_*` flags (`OpenFlags` bits); unknown bits are `EINVAL`, unlike `openat`.
    pub flags: u64,
    /// Mode for `O_CREAT`/`O_TMPFILE` (at most `0o7777`); must be 0 otherwise.
    pub mode: u64,
    /// `RESOLVE_*` flags.
    pub resolve: u64,
}

impl OpenHow {
    /// An `open_how` of `flags`, `mode` (permission bits for `O_CREAT`/`O_TMPFILE`; must be
    /// 0 otherwise, or `openat2` gives `EINVAL`) and `resolve`.
    pub fn new(flags: OpenFlags, mode: u32, resolve: ResolveFlags) -> OpenHow {
        OpenHow {
            flags: u64::from(flags.bits()),
            mode: u64::from(mode),
            resolve: resolve.bits(),
        }
    }
}

/// `build_open_flags` for `openat2`: every argument checked, in Linux's order. Returns the
/// open flags (with `O_LARGEFILE` unless `O_PATH`, as the syscall adds it) and the
/// `LOOKUP_*` restrictions.
///
/// # Errors
/// `EINVAL`, `EAGAIN` as [`Task::openat2`].
fn build_open_how2(how: &OpenHow) -> Result<(OpenFlags, u32)> {
    let mut raw = how.flags;
    if raw & OpenFlags::PATH.bits() as u64 == 0 {
        raw |= OpenFlags::LARGEFILE.bits() as u64;
    }
    raw &= !(OpenFlags::CLOEXEC.bits() as u64);
    if raw & !(VALID_OPEN_FLAGS.bits() as u64) != 0 {
        return Err(Errno::EINVAL);
    }
    if how.resolve & !VALID_RESOLVE_FLAGS != 0 {
        return Err(Errno::EINVAL);
    }
    if how.resolve & RESOLVE_BENEATH != 0 && how.resolve & RESOLVE_IN_ROOT != 0 {
        return Err(Errno::EINVAL);
    }
    let flags = OpenFlags::from_bits_retain(raw as u32);
    let will_create = flags.contains(OpenFlags::CREAT) || flags.intersects(O_TMPFILE_BIT);
    if will_create && how.mode & !0o7777 != 0 || !will_create && how.mode != 0 {
        return Err(Errno::EINVAL);
    }
    build_open_flags(flags)?;
    if flags.contains(OpenFlags::PATH) && !(flags - O_PATH_FLAGS).is_empty() {
        return Err(Errno::EINVAL);
    }
    if how.resolve & RESOLVE_CACHED != 0
        && (flags.intersects(OpenFlags::TRUNC | OpenFlags::CREAT)
            || flags.intersects(O_TMPFILE_BIT))
    {
        return Err(Errno::EAGAIN);
    }
    let mut lookup = 0;
    if how.resolve & RESOLVE_NO_XDEV != 0 {
        lookup |= crate::namei::LOOKUP_NO_XDEV;
    }
    if how.resolve & RESOLVE_NO_SYMLINKS != 0 {
        lookup |= crate::namei::LOOKUP_NO_SYMLINKS;
    }
    if how.resolve & RESOLVE_BENEATH != 0 {
        lookup |= crate::namei::LOOKUP_BENEATH;
    }
    if how.resolve & RESOLVE_IN_ROOT != 0 {
        lookup |= crate::namei::LOOKUP_IN_ROOT;
    }
    Ok((flags, lookup))
}

impl<V: Variant> Task<V> {
    /// `openat2(2)`: `openat` with every argument checked and the walk restricted by
    /// `how.resolve` (`RESOLVE_*`, see the constants). The descriptor's `O_CLOEXEC` comes
    /// from `how.flags`.
    ///
    /// Stricter than `openat`: unknown flag bits, flags besides `O_PATH_FLAGS` with `O_PATH`,
    /// and a mode without `O_CREAT`/`O_TMPFILE` are errors instead of being dropped.
    ///
    /// A scoped walk (`RESOLVE_BENEATH`, `RESOLVE_IN_ROOT`) that goes up with `..` while a
    /// concurrent rename moves a directory out from under it fails with `EAGAIN` rather than
    /// escape (Linux: any rename during such a walk is `EAGAIN`).
    ///
    /// # Errors
    /// In Linux's order: `EINVAL` (unknown flag bits; unknown `resolve` bits;
    /// `RESOLVE_BENEATH` with `RESOLVE_IN_ROOT`; a mode above `0o7777`, or any mode without
    /// `O_CREAT`/`O_TMPFILE`; `O_CREAT|O_DIRECTORY`; a bad `O_TMPFILE`; `O_PATH` with other
    /// flags than `O_DIRECTORY`, `O_NOFOLLOW`, `O_CLOEXEC`), `EAGAIN` (`RESOLVE_CACHED` with
    /// `O_CREAT`, `O_TRUNC` or `O_TMPFILE`; a scoped walk raced by a rename), then
    /// `EMFILE`, `EXDEV` (`RESOLVE_BENEATH`: an absolute path or symlink, `..` at `dirfd`),
    /// `ELOOP` (`RESOLVE_NO_SYMLINKS`: a symlink to follow), and the errors of
    /// [`openat`](Self::openat).
    ///
    /// # References
    /// openat2(2); Linux `do_sys_openat2`, `build_open_flags`, `path_init`,
    /// `follow_dotdot`, `pick_link`, `nd_jump_root`.
    pub fn openat2<'a>(
        &self,
        dirfd: impl Into<AtDir<'a>>,
        path: impl AsPath,
        how: &OpenHow,
    ) -> Result<Fd> {
        let dirfd: AtDir<'_> = dirfd.into();
        let (flags, lookup) = build_open_how2(how)?;
        let path = getname(path.path_bytes(), false)?;
        let cloexec = how.flags & OpenFlags::CLOEXEC.bits() as u64 != 0;
        let fd = self.fd_table().alloc_fd(0, cloexec)?;
        match self.do_filp_open_lookup(dirfd, path, flags, how.mode as u32, lookup) {
            Ok(file) => {
                self.fd_table().fd_install(fd, file);
                Ok(Fd(fd as i32))
            }
            Err(e) => self.open_failed(fd, e, dirfd, path, flags, how.mode as u32, lookup),
        }
    }
}
