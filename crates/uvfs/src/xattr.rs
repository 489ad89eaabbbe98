//! Extended attributes: `getxattr`, `setxattr`, `listxattr`, `removexattr` and their `l`
//! (no final symlink follow), `f` (descriptor) and `at` (relative to a directory or a
//! dentry, Linux 6.13) forms.
//!
//! Linux analogue: fs/xattr.c (`setxattr_copy`, `import_xattr_name`, `xattr_permission`,
//! `xattr_resolve_name`, `vfs_getxattr`, `vfs_listxattr`, `vfs_removexattr`),
//! security/commoncap.c (`cap_inode_setxattr`, `cap_inode_removexattr`), mm/shmem.c
//! (tmpfs's `security.`, `trusted.` and `user.` handlers).
//!
//! The VFS checks the arguments, the caller's rights and the name's namespace, in Linux's
//! order; the file system stores the attributes ([`InodeOps::getxattr`],
//! [`InodeOps::setxattr`], [`InodeOps::listxattr`]; tmpfs: per inode, charged to
//! `nr_inodes`' inode space when the mount has it). The namespaces are tmpfs's: `user.`
//! (regular files and directories only), `trusted.` (`CAP_SYS_ADMIN`: root) and `security.`
//! (no LSM: any caller reads, `CAP_SYS_ADMIN` writes, as commoncap). `system.` names,
//! POSIX ACLs included, are `EOPNOTSUPP`: uvfs has no ACLs (a Linux tmpfs built with
//! `CONFIG_TMPFS_POSIX_ACL` stores them). Values are stored as given, but for
//! `security.capability`, whose header is checked as `cap_convert_nscap` checks it (uvfs
//! has one user namespace: a version 3 value keeps the root id it was given).
//!
//! [`InodeOps::getxattr`]: crate::fs::InodeOps::getxattr
//! [`InodeOps::setxattr`]: crate::fs::InodeOps::setxattr
//! [`InodeOps::listxattr`]: crate::fs::InodeOps::listxattr

use crate::cred::{MAY_READ, MAY_WRITE};
use crate::dentry::Dentry;
use crate::inode::Inode;
use crate::mount::Mount;
use crate::namei::{getname, AtDir};
use crate::task::Task;
use crate::time::coarse_now;
use crate::types::AsPath;
use crate::types::{AtFlags, Fd, S_IFDIR, S_IFMT, S_IFREG, S_ISVTX};
use crate::variant::Variant;
use crate::{Errno, Result};
use std::sync::Arc;

/// `XATTR_CREATE` (setxattr(2) `flags`): fail with `EEXIST` if the attribute exists.
pub const XATTR_CREATE: u32 = 1;
/// `XATTR_REPLACE` (setxattr(2) `flags`): fail with `ENODATA` if the attribute does not
/// exist.
pub const XATTR_REPLACE: u32 = 2;
/// `XATTR_NAME_MAX`: the longest name, in bytes.
pub const XATTR_NAME_MAX: usize = 255;
/// `XATTR_SIZE_MAX`: the largest value, in bytes.
pub const XATTR_SIZE_MAX: usize = 65536;
/// `XATTR_LIST_MAX`: the largest list `listxattr` copies, in bytes.
pub const XATTR_LIST_MAX: usize = 65536;

/// A file system's `->listxattr` answer from the full list `all` (NUL-terminated names):
/// without `trusted.*` names unless `trusted`, copied into `buf` (`ERANGE` when it does not
/// fit) or, with `None`, only its length. For file systems that get the whole list from
/// elsewhere (hostfs from the host, the FUSE client from its server).
pub(crate) fn filter_list(all: &[u8], buf: Option<&mut [u8]>, trusted: bool) -> Result<usize> {
    let names = all
        .split_inclusive(|&c| c == 0)
        .filter(|e| trusted || !e.starts_with(b"trusted."));
    let mut len = 0;
    match buf {
        None => names.for_each(|e| len += e.len()),
        Some(buf) => {
            for e in names {
                let dst = buf.get_mut(len..len + e.len()).ok_or(Errno::ERANGE)?;
                dst.copy_from_slice(e);
                len += e.len();
            }
        }
    }
    Ok(len)
}

/// `XATTR_NAME_CAPS`: file capabilities.
const XATTR_NAME_CAPS: &[u8] = b"security.capability";

/// `cap_convert_nscap`'s checks of a `security.capability` value: a version 2 (20 bytes)
/// or 3 (24 bytes) header whose magic is exactly the revision, bar the effective flag
/// (`validheader`, `sansflags`), then `CAP_SETFCAP` (root), then a version 3 root id that
/// maps to a user (not `(uid_t)-1`).
///
/// # Errors
/// `EINVAL` for any other value (version 1 ones included, as Linux refuses them on set),
/// `EPERM` without `CAP_SETFCAP`.
fn check_caps_value(value: &[u8], root: bool) -> Result<()> {
    /// `VFS_CAP_FLAGS_EFFECTIVE`.
    const FLAGS_EFFECTIVE: u32 = 0x0000_0001;
    let word = |at: usize| {
        value
            .get(at..at + 4)
            .map(|m| u32::from_le_bytes([m[0], m[1], m[2], m[3]]))
    };
    let magic = word(0).map(|m| m & !FLAGS_EFFECTIVE);
    let valid = matches!(
        (value.len(), magic),
        (20, Some(0x0200_0000)) | (24, Some(0x0300_0000))
    );
    if !valid {
        return Err(Errno::EINVAL);
    }
    if !root {
        return Err(Errno::EPERM);
    }
    if value.len() == 24 && word(20) == Some(u32::MAX) {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// The namespaces tmpfs has handlers for (`shmem_xattr_handlers`).
const PREFIXES: [&[u8]; 3] = [b"security.", b"trusted.", b"user."];

/// Which file a call is about: a path relative to a directory (following a final symlink
/// or not; whether an empty path names the directory itself, `AT_EMPTY_PATH`) or a
/// descriptor.
#[derive(Clone, Copy)]
enum Target<'a> {
    Path {
        dir: AtDir<'a>,
        path: &'a [u8],
        follow: bool,
        empty_ok: bool,
    },
    Fd(Fd),
}

impl<'a> Target<'a> {
    /// `path` from the cwd, as the `getxattr`/`lgetxattr` families.
    fn cwd(path: &'a [u8], follow: bool) -> Target<'a> {
        Target::Path {
            dir: AtDir::Fd(Fd::AT_FDCWD),
            path,
            follow,
            empty_ok: false,
        }
    }

    /// `path` relative to `dir` with `at_flags`, as the `getxattrat` family (Linux 6.13).
    ///
    /// # Errors
    /// `EINVAL` for flags other than `AT_SYMLINK_NOFOLLOW` and `AT_EMPTY_PATH`.
    fn at(dir: AtDir<'a>, path: &'a [u8], at_flags: AtFlags) -> Result<Target<'a>> {
        if !(at_flags - (AtFlags::SYMLINK_NOFOLLOW | AtFlags::EMPTY_PATH)).is_empty() {
            return Err(Errno::EINVAL);
        }
        Ok(Target::Path {
            dir,
            path,
            follow: !at_flags.contains(AtFlags::SYMLINK_NOFOLLOW),
            empty_ok: at_flags.contains(AtFlags::EMPTY_PATH),
        })
    }
}

/// `import_xattr_name`: 1 ..= 255 bytes. An interior NUL (which a C caller could not pass)
/// is `EINVAL`, as for paths (`getname`).
fn import_name(name: &[u8]) -> Result<&[u8]> {
    if name.is_empty() || name.len() > XATTR_NAME_MAX {
        return Err(Errno::ERANGE);
    }
    if name.contains(&0) {
        return Err(Errno::EINVAL);
    }
    Ok(name)
}

/// `xattr_resolve_name`: a name with one of tmpfs's prefixes and something after it.
///
/// # Errors
/// `EINVAL` for a bare prefix (`user.`), `EOPNOTSUPP` for any other namespace (`system.`
/// and POSIX ACLs included).
fn resolve_name(name: &[u8]) -> Result<()> {
    match PREFIXES.iter().find(|p| name.starts_with(p)) {
        Some(p) if name.len() == p.len() => Err(Errno::EINVAL),
        Some(_) => Ok(()),
        None => Err(Errno::EOPNOTSUPP),
    }
}

impl<V: Variant> Task<V> {
    /// `xattr_permission`: may the caller read (`MAY_READ`) or write (`MAY_WRITE`) the
    /// attribute `name` of `inode`; for writes also `cap_inode_setxattr` /
    /// `cap_inode_removexattr` (`security.*` needs `CAP_SYS_ADMIN`).
    ///
    /// # Errors
    /// Writes: `EPERM` (`trusted.*` or `security.*` without `CAP_SYS_ADMIN`; `user.*` on
    /// anything but a regular file or directory, or on a sticky directory the caller does
    /// not own). Reads: `ENODATA` for those `trusted.*` and `user.*` cases. `EACCES` from
    /// the permission bits for `user.*` and unknown namespaces.
    fn xattr_permission(&self, inode: &Inode, name: &[u8], mask: u32) -> Result<()> {
        let write = mask & MAY_WRITE != 0;
        let hidden = if write { Errno::EPERM } else { Errno::ENODATA };
        if name.starts_with(b"security.") || name.starts_with(b"system.") {
            // cap_inode_setxattr / cap_inode_removexattr: `security.capability` needs
            // CAP_SETFCAP (also cap_convert_nscap's check of a value), any other
            // `security.*` CAP_SYS_ADMIN.
            let need = if name == XATTR_NAME_CAPS {
                crate::Caps::SETFCAP
            } else {
                crate::Caps::SYS_ADMIN
            };
            if write && name.starts_with(b"security.") && !self.cred.capable(need) {
                return Err(Errno::EPERM);
            }
            return Ok(());
        }
        if name.starts_with(b"trusted.") {
            // xattr_permission: `trusted.*` needs CAP_SYS_ADMIN (`capable`).
            return if self.cred.capable(crate::Caps::SYS_ADMIN) {
                Ok(())
            } else {
                Err(hidden)
            };
        }
        if name.starts_with(b"user.") {
            let mode = inode.mode();
            let ty = mode & S_IFMT;
            if ty != S_IFREG && ty != S_IFDIR {
                return Err(hidden);
            }
            if ty == S_IFDIR
                && mode & S_ISVTX != 0
                && write
                && !self.cred.owner_or_capable(inode.uid())
            {
                return Err(Errno::EPERM);
            }
        }
        inode.permission(&self.cred, mask)
    }

    /// Runs `f` on the dentry `target` names: a path looked up from its directory, or an
    /// open descriptor (`O_PATH` ones are `EBADF`, as `fdget`). An empty path with
    /// `AT_EMPTY_PATH` names a descriptor directory as that descriptor (so `AT_FDCWD` and
    /// `O_PATH` ones are `EBADF`, as Linux's `path_getxattrat`), a dentry as itself.
    fn with_xattr_target<R>(
        &self,
        target: Target<'_>,
        mut f: impl FnMut(&Arc<Dentry>, &Mount) -> Result<R>,
    ) -> Result<R> {
        match target {
            Target::Fd(fd) => {
                let file = self.fdget(fd)?;
                f(file.dentry(), file.mount())
            }
            Target::Path {
                dir,
                path,
                follow,
                empty_ok,
            } => {
                let path = getname(path, empty_ok)?;
                match dir {
                    AtDir::Fd(fd) if path.is_empty() => self.with_xattr_target(Target::Fd(fd), f),
                    dir => self.lookup_with(&self.cred, dir, path, follow, f),
                }
            }
        }
    }

    fn do_getxattr(&self, target: Target<'_>, name: &[u8], buf: &mut [u8]) -> Result<usize> {
        let name = import_name(name)?;
        self.with_xattr_target(target, |d, _| {
            let inode = &d.d_inode;
            self.xattr_permission(inode, name, MAY_READ)?;
            resolve_name(name)?;
            inode.refresh()?;
            let len = buf.len().min(XATTR_SIZE_MAX);
            let buf = (len > 0).then(|| &mut buf[..len]);
            inode.i_op.getxattr(inode, name, buf)
        })
    }

    fn do_setxattr(
        &self,
        target: Target<'_>,
        name: &[u8],
        value: Option<&[u8]>,
        flags: u32,
    ) -> Result<()> {
        // setxattr_copy: flags, the name, the size, before the lookup or the descriptor.
        if flags & !(XATTR_CREATE | XATTR_REPLACE) != 0 {
            return Err(Errno::EINVAL);
        }
        let name = import_name(name)?;
        if value.is_some_and(|v| v.len() > XATTR_SIZE_MAX) {
            return Err(Errno::E2BIG);
        }
        self.with_xattr_target(target, |d, m| {
            let inode = &d.d_inode;
            // path_setxattr / file_setxattr: mnt_want_write before vfs_setxattr.
            m.want_write()?;
            // vfs_setxattr: a file capability is checked (and would be converted) first.
            if let (XATTR_NAME_CAPS, Some(v)) = (name, value) {
                if !v.is_empty() {
                    check_caps_value(v, self.cred.capable(crate::Caps::SETFCAP))?;
                }
            }
            self.xattr_permission(inode, name, MAY_WRITE)?;
            resolve_name(name)?;
            inode.i_op.setxattr(inode, name, value, flags)?;
            if value.is_some() && name.starts_with(b"security.") {
                inode.clear_nosec();
            }
            inode.touch_ctime(coarse_now());
            Ok(())
        })
    }

    fn do_listxattr(&self, target: Target<'_>, buf: &mut [u8]) -> Result<usize> {
        self.with_xattr_target(target, |d, _| {
            let inode = &d.d_inode;
            inode.refresh()?;
            let len = buf.len().min(XATTR_LIST_MAX);
            let trusted = self.cred.capable(crate::Caps::SYS_ADMIN);
            if len == 0 {
                return inode.i_op.listxattr(inode, None, trusted);
            }
            match inode.i_op.listxattr(inode, Some(&mut buf[..len]), trusted) {
                // A list longer than any buffer may be (`listxattr` in fs/xattr.c).
                Err(Errno::ERANGE) if len == XATTR_LIST_MAX => Err(Errno::E2BIG),
                r => r,
            }
        })
    }

    /// `getxattr(2)`: copies the value of extended attribute `name` of the file `path`
    /// names (following a final symlink) into `buf` and returns its length; with an empty
    /// `buf`, returns the length only.
    ///
    /// # Errors
    /// `ERANGE` (`name` empty or longer than 255 bytes; `buf` too small), `EINVAL` (a bare
    /// namespace prefix such as `user.`; a NUL in `name`), `EOPNOTSUPP` (a namespace other
    /// than `user.`, `trusted.`, `security.`), `ENODATA` (no such attribute; `trusted.*`
    /// without `CAP_SYS_ADMIN`; `user.*` on a symlink or special file), `EACCES` (no read
    /// permission, `user.*`), and the walk's (`ENOENT`, `ENOTDIR`, `ELOOP`, ...).
    ///
    /// # References
    /// getxattr(2), xattr(7); Linux `path_getxattr`, `vfs_getxattr`, `simple_xattr_get`.
    pub fn getxattr(
        &self,
        path: impl AsPath,
        name: impl AsRef<[u8]>,
        buf: &mut [u8],
    ) -> Result<usize> {
        self.do_getxattr(Target::cwd(path.path_bytes(), true), name.as_ref(), buf)
    }

    /// `lgetxattr(2)`: [`getxattr`](Self::getxattr) of a final symlink itself.
    ///
    /// # Errors
    /// As [`getxattr`](Self::getxattr).
    pub fn lgetxattr(
        &self,
        path: impl AsPath,
        name: impl AsRef<[u8]>,
        buf: &mut [u8],
    ) -> Result<usize> {
        self.do_getxattr(Target::cwd(path.path_bytes(), false), name.as_ref(), buf)
    }

    /// `fgetxattr(2)`: [`getxattr`](Self::getxattr) of the open file `fd`.
    ///
    /// # Errors
    /// As [`getxattr`](Self::getxattr), with `EBADF` (not open, or `O_PATH`) after the
    /// name's checks in place of the walk's.
    pub fn fgetxattr(&self, fd: Fd, name: impl AsRef<[u8]>, buf: &mut [u8]) -> Result<usize> {
        self.do_getxattr(Target::Fd(fd), name.as_ref(), buf)
    }

    /// `setxattr(2)`: sets extended attribute `name` of the file `path` names to `value`
    /// (empty is a value, not a removal); `flags`: [`XATTR_CREATE`] (fail if it exists),
    /// [`XATTR_REPLACE`] (fail if it does not), or 0. Stamps the ctime.
    ///
    /// # Errors
    /// `EINVAL` (unknown `flags`; a bare prefix; a NUL in `name`), `ERANGE` (`name` empty or
    /// longer than 255 bytes), `E2BIG` (`value` longer than 65536 bytes) — these three before
    /// the walk — then the walk's, `EPERM` (`trusted.*`/`security.*` without
    /// `CAP_SYS_ADMIN`; `user.*` on a symlink, special file or another user's sticky
    /// directory), `EACCES` (no write permission), `EOPNOTSUPP` (other namespaces),
    /// `EEXIST`, `ENODATA` (the flags), `ENOSPC` (the mount's `nr_inodes` inode space).
    ///
    /// # References
    /// setxattr(2); Linux `path_setxattr`, `setxattr_copy`, `vfs_setxattr`,
    /// `shmem_xattr_handler_set`.
    pub fn setxattr(
        &self,
        path: impl AsPath,
        name: impl AsRef<[u8]>,
        value: &[u8],
        flags: u32,
    ) -> Result<()> {
        let t = Target::cwd(path.path_bytes(), true);
        self.do_setxattr(t, name.as_ref(), Some(value), flags)
    }

    /// `lsetxattr(2)`: [`setxattr`](Self::setxattr) of a final symlink itself.
    ///
    /// # Errors
    /// As [`setxattr`](Self::setxattr).
    pub fn lsetxattr(
        &self,
        path: impl AsPath,
        name: impl AsRef<[u8]>,
        value: &[u8],
        flags: u32,
    ) -> Result<()> {
        let t = Target::cwd(path.path_bytes(), false);
        self.do_setxattr(t, name.as_ref(), Some(value), flags)
    }

    /// `fsetxattr(2)`: [`setxattr`](Self::setxattr) of the open file `fd`.
    ///
    /// # Errors
    /// As [`setxattr`](Self::setxattr), with `EBADF` (not open, or `O_PATH`) after the
    /// argument checks in place of the walk's.
    pub fn fsetxattr(
        &self,
        fd: Fd,
        name: impl AsRef<[u8]>,
        value: &[u8],
        flags: u32,
    ) -> Result<()> {
        self.do_setxattr(Target::Fd(fd), name.as_ref(), Some(value), flags)
    }

    /// `listxattr(2)`: the NUL-terminated names of the extended attributes of the file
    /// `path` names, in name order, into `buf`; returns their length (with an empty `buf`,
    /// the length only). `trusted.*` names are listed only for root (`CAP_SYS_ADMIN`).
    /// Needs no permission on the file.
    ///
    /// # Errors
    /// `ERANGE` (`buf` too small), `E2BIG` (the list is longer than 65536 bytes and `buf`
    /// is at least that long), and the walk's.
    ///
    /// # References
    /// listxattr(2); Linux `path_listxattr`, `vfs_listxattr`, `simple_xattr_list`.
    pub fn listxattr(&self, path: impl AsPath, buf: &mut [u8]) -> Result<usize> {
        self.do_listxattr(Target::cwd(path.path_bytes(), true), buf)
    }

    /// `llistxattr(2)`: [`listxattr`](Self::listxattr) of a final symlink itself.
    ///
    /// # Errors
    /// As [`listxattr`](Self::listxattr).
    pub fn llistxattr(&self, path: impl AsPath, buf: &mut [u8]) -> Result<usize> {
        self.do_listxattr(Target::cwd(path.path_bytes(), false), buf)
    }

    /// `flistxattr(2)`: [`listxattr`](Self::listxattr) of the open file `fd`.
    ///
    /// # Errors
    /// `EBADF` (not open, or `O_PATH`); then as [`listxattr`](Self::listxattr).
    pub fn flistxattr(&self, fd: Fd, buf: &mut [u8]) -> Result<usize> {
        self.do_listxattr(Target::Fd(fd), buf)
    }

    /// `removexattr(2)`: removes extended attribute `name` of the file `path` names.
    /// Stamps the ctime.
    ///
    /// # Errors
    /// `ERANGE`/`EINVAL` (the name, before the walk), the walk's, `EPERM`/`EACCES` as
    /// [`setxattr`](Self::setxattr), `EOPNOTSUPP` (other namespaces), `ENODATA` (no such
    /// attribute).
    ///
    /// # References
    /// removexattr(2); Linux `path_removexattr`, `vfs_removexattr`.
    pub fn removexattr(&self, path: impl AsPath, name: impl AsRef<[u8]>) -> Result<()> {
        let t = Target::cwd(path.path_bytes(), true);
        self.do_setxattr(t, name.as_ref(), None, XATTR_REPLACE)
    }

    /// `lremovexattr(2)`: [`removexattr`](Self::removexattr) of a final symlink itself.
    ///
    /// # Errors
    /// As [`removexattr`](Self::removexattr).
    pub fn lremovexattr(&self, path: impl AsPath, name: impl AsRef<[u8]>) -> Result<()> {
        let t = Target::cwd(path.path_bytes(), false);
        self.do_setxattr(t, name.as_ref(), None, XATTR_REPLACE)
    }

    /// `fremovexattr(2)`: [`removexattr`](Self::removexattr) of the open file `fd`.
    ///
    /// # Errors
    /// As [`removexattr`](Self::removexattr), with `EBADF` (not open, or `O_PATH`) after
    /// the name's checks in place of the walk's.
    pub fn fremovexattr(&self, fd: Fd, name: impl AsRef<[u8]>) -> Result<()> {
        self.do_setxattr(Target::Fd(fd), name.as_ref(), None, XATTR_REPLACE)
    }
    /// `getxattrat(2)` (Linux 6.13): [`getxattr`](Self::getxattr) of `path` relative to
    /// `dirfd`; `at_flags`: `AT_SYMLINK_NOFOLLOW` (as [`lgetxattr`](Self::lgetxattr)),
    /// `AT_EMPTY_PATH` (an empty path names `dirfd` itself: a descriptor as
    /// [`fgetxattr`](Self::fgetxattr), a dentry as that dentry, which is how the FUSE
    /// server names a node).
    ///
    /// # Errors
    /// `EINVAL` (other `at_flags`, first), then as [`getxattr`](Self::getxattr); `EBADF` for
    /// an empty path with a descriptor that is not open, `O_PATH`, or `AT_FDCWD`.
    ///
    /// # References
    /// getxattrat(2); Linux `path_getxattrat`.
    pub fn getxattrat<'a>(
        &self,
        dirfd: impl Into<AtDir<'a>>,
        path: impl AsPath,
        at_flags: AtFlags,
        name: impl AsRef<[u8]>,
        buf: &mut [u8],
    ) -> Result<usize> {
        let t = Target::at(dirfd.into(), path.path_bytes(), at_flags)?;
        self.do_getxattr(t, name.as_ref(), buf)
    }

    /// `setxattrat(2)` (Linux 6.13): [`setxattr`](Self::setxattr) of `path` relative to
    /// `dirfd`, `at_flags` as [`getxattrat`](Self::getxattrat).
    ///
    /// # Errors
    /// `EINVAL` (other `at_flags`, first), then as [`setxattr`](Self::setxattr) and
    /// [`getxattrat`](Self::getxattrat).
    ///
    /// # References
    /// setxattrat(2); Linux `path_setxattrat`.
    pub fn setxattrat<'a>(
        &self,
        dirfd: impl Into<AtDir<'a>>,
        path: impl AsPath,
        at_flags: AtFlags,
        name: impl AsRef<[u8]>,
        value: &[u8],
        flags: u32,
    ) -> Result<()> {
        let t = Target::at(dirfd.into(), path.path_bytes(), at_flags)?;
        self.do_setxattr(t, name.as_ref(), Some(value), flags)
    }

    /// `listxattrat(2)` (Linux 6.13): [`listxattr`](Self::listxattr) of `path` relative to
    /// `dirfd`, `at_flags` as [`getxattrat`](Self::getxattrat).
    ///
    /// # Errors
    /// `EINVAL` (other `at_flags`), then as [`listxattr`](Self::listxattr) and
    /// [`getxattrat`](Self::getxattrat).
    ///
    /// # References
    /// listxattrat(2); Linux `path_listxattrat`.
    pub fn listxattrat<'a>(
        &self,
        dirfd: impl Into<AtDir<'a>>,
        path: impl AsPath,
        at_flags: AtFlags,
        buf: &mut [u8],
    ) -> Result<usize> {
        let t = Target::at(dirfd.into(), path.path_bytes(), at_flags)?;
        self.do_listxattr(t, buf)
    }

    /// `removexattrat(2)` (Linux 6.13): [`removexattr`](Self::removexattr) of `path`
    /// relative to `dirfd`, `at_flags` as [`getxattrat`](Self::getxattrat).
    ///
    /// # Errors
    /// `EINVAL` (other `at_flags`, first), then as [`removexattr`](Self::removexattr) and
    /// [`getxattrat`](Self::getxattrat).
    ///
    /// # References
    /// removexattrat(2); Linux `path_removexattrat`.
    pub fn removexattrat<'a>(
        &self,
        dirfd: impl Into<AtDir<'a>>,
        path: impl AsPath,
        at_flags: AtFlags,
        name: impl AsRef<[u8]>,
    ) -> Result<()> {
        let t = Target::at(dirfd.into(), path.path_bytes(), at_flags)?;
        self.do_setxattr(t, name.as_ref(), None, XATTR_REPLACE)
    }
}
