//! Permission predicates of the namespace calls: who may create, delete and link, and
//! what a new inode's owner and mode are.
//!
//! Linux analogue: fs/namei.c (`may_create`, `may_delete`, `check_sticky`, `may_linkat`),
//! fs/inode.c (`inode_init_owner`, `mode_strip_sgid`).

use super::*;

/// `check_sticky`: in a sticky directory only the file's or directory's owner (or root) may
/// remove or rename an entry.
pub(super) fn check_sticky(cred: &Cred, dir: &Inode, inode: &Inode) -> bool {
    dir.mode() & S_ISVTX != 0
        && inode.uid() != cred.uid
        && dir.uid() != cred.uid
        && !cred.capable(crate::Caps::FOWNER)
}

/// `may_delete`: may `cred` remove `victim` from `dir` (`is_dir`: for rmdir/rename of a dir)?
///
/// # Errors
/// `EACCES` (no write+search on `dir`), `EPERM` (sticky), `ENOTDIR`/`EISDIR` (type
/// mismatch), `ENOENT` (dead directory).
pub(super) fn may_delete(
    cred: &Cred,
    dir: &Inode,
    victim: &Inode,
    is_dir: bool,
    dead: bool,
) -> Result<()> {
    dir.permission(cred, MAY_WRITE | MAY_EXEC)?;
    if check_sticky(cred, dir, victim) {
        return Err(Errno::EPERM);
    }
    if is_dir {
        if !victim.is_dir() {
            return Err(Errno::ENOTDIR);
        }
    } else if victim.is_dir() {
        return Err(Errno::EISDIR);
    }
    if dead {
        return Err(Errno::ENOENT);
    }
    Ok(())
}

/// `may_linkat`: with `fs.protected_hardlinks` off (`protected` false) anyone may link
/// `inode`; with it on, its owner or root, and anyone else only a "safe" source
/// (`safe_hardlink_source`): a regular file, not set-user-ID, not set-group-ID and
/// group-executable, readable and writable by `cred`.
///
/// # Errors
/// `EPERM` otherwise.
pub(super) fn may_linkat(cred: &Cred, inode: &Inode, protected: bool) -> Result<()> {
    if !protected || cred.owner_or_capable(inode.uid()) {
        return Ok(());
    }
    let mode = inode.mode();
    let safe = inode.is_reg()
        && mode & S_ISUID == 0
        && mode & (S_ISGID | S_IXGRP) != (S_ISGID | S_IXGRP)
        && inode.permission(cred, MAY_READ | MAY_WRITE).is_ok();
    if safe {
        Ok(())
    } else {
        Err(Errno::EPERM)
    }
}

/// `may_create`: may `cred` create an entry in `dir`?
///
/// # Errors
/// `ENOENT` (the directory was removed), `EACCES` (no write+search permission).
pub(super) fn may_create(cred: &Cred, dir: &Inode, dead: bool) -> Result<()> {
    if dead {
        return Err(Errno::ENOENT);
    }
    dir.permission(cred, MAY_WRITE | MAY_EXEC)
}

/// `mode_strip_sgid`: a non-directory `mode` (permission bits as given to the call,
/// before the umask) with `S_ISGID` removed when it is group-executable, `dir` is
/// set-group-ID and the creator is neither in `dir`'s group nor root (`CAP_FSETID`): the
/// new file would get that group, which the creator may not hand out with set-group-ID.
pub(crate) fn mode_strip_sgid(cred: &Cred, dir: &Inode, mode: u32) -> u32 {
    if mode & (S_ISGID | S_IXGRP) != S_ISGID | S_IXGRP
        || mode & S_IFMT == S_IFDIR
        || dir.mode() & S_ISGID == 0
        || cred.in_group(dir.gid())
        || cred.capable(crate::Caps::FSETID)
    {
        return mode;
    }
    mode & !S_ISGID
}

/// `inode_init_owner`: the group and mode of a new inode created in `dir` with `mode`
/// (umask applied): a setgid directory passes its group on, and to subdirectories its
/// set-group-ID bit; otherwise the creator's group.
pub(crate) fn inode_init_owner(cred: &Cred, dir: &Inode, mode: u32, is_dir: bool) -> (u32, u32) {
    if dir.mode() & S_ISGID == 0 {
        return (cred.gid, mode);
    }
    let mode = if is_dir {
        mode | S_ISGID
    } else {
        // Callers strip before the umask (as `vfs_prepare_mode`); this catches those that
        // do not, as far as the masked mode still tells.
        mode_strip_sgid(cred, dir, mode)
    };
    (dir.gid(), mode)
}
