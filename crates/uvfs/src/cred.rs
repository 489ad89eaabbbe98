//! `Cred`: a task's credentials, and the permission check on an inode.
//!
//! Linux analogue: `include/linux/cred.h`, `fs/namei.c` `generic_permission`,
//! `acl_permission_check`, `capable_wrt_inode_uidgid`.

use std::sync::Arc;

/// A set of Linux capabilities: bit `n` is capability number `n`
/// (include/uapi/linux/capability.h), as in `/proc/PID/status`'s `CapEff:` mask.
///
/// uvfs asks for the ones named by the constants below, each where Linux asks for it;
/// the others are carried (so a set read from the kernel round-trips) but checked nowhere.
///
/// # References
/// capabilities(7); Linux `kernel_cap_t`, `cap_raised`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Caps(pub u64);

impl Caps {
    /// No capability.
    pub const EMPTY: Caps = Caps(0);
    /// Every capability Linux defines (0 ..= `CAP_LAST_CAP` = 40, `CAP_CHECKPOINT_RESTORE`):
    /// root's default effective set, `CapEff: 000001ffffffffff`.
    pub const ALL: Caps = Caps((1 << 41) - 1);
    /// `CAP_CHOWN` (0): change a file's owner, or its group to one the caller is not in
    /// (`chown_ok`, `chgrp_ok`).
    pub const CHOWN: Caps = Caps(1 << 0);
    /// `CAP_DAC_OVERRIDE` (1): pass read, write and search checks, and execute checks on a
    /// file with at least one execute bit (`generic_permission`).
    pub const DAC_OVERRIDE: Caps = Caps(1 << 1);
    /// `CAP_DAC_READ_SEARCH` (2): pass read checks on files and read and search checks on
    /// directories (`generic_permission`); `linkat(AT_EMPTY_PATH)` of any descriptor.
    pub const DAC_READ_SEARCH: Caps = Caps(1 << 2);
    /// `CAP_FOWNER` (3): act as a file's owner (`inode_owner_or_capable`: chmod, utimes,
    /// `O_NOATIME`, `user.*` xattrs on sticky directories), delete in sticky directories
    /// (`check_sticky`), link anything under `protected_hardlinks` (`may_linkat`).
    pub const FOWNER: Caps = Caps(1 << 3);
    /// `CAP_FSETID` (4): keep set-user-ID and set-group-ID bits on a write or chown
    /// (`setattr_should_drop_suidgid`), set set-group-ID for a group the caller is not in
    /// (`in_group_or_capable`, `mode_strip_sgid`).
    pub const FSETID: Caps = Caps(1 << 4);
    /// `CAP_SYS_CHROOT` (18): `chroot` (`ksys_chroot`).
    pub const SYS_CHROOT: Caps = Caps(1 << 18);
    /// `CAP_SYS_ADMIN` (21): mounts (`may_mount`), `trusted.*` xattrs and `security.*`
    /// writes (`cap_inode_setxattr`).
    pub const SYS_ADMIN: Caps = Caps(1 << 21);
    /// `CAP_MKNOD` (27): `mknod` of character and block devices (`vfs_mknod`).
    pub const MKNOD: Caps = Caps(1 << 27);
    /// `CAP_SETFCAP` (31): writing `security.capability` (`cap_convert_nscap`).
    pub const SETFCAP: Caps = Caps(1 << 31);

    /// The default effective (and permitted) set of a task with effective uid `uid`: all
    /// for 0, none for any other (capabilities(7), "Effect of user ID changes on
    /// capabilities"; Linux `cap_bprm_creds_from_file` for root).
    pub const fn for_uid(uid: u32) -> Caps {
        if uid == 0 {
            Caps::ALL
        } else {
            Caps::EMPTY
        }
    }

    /// Whether every capability of `other` is in this set (`cap_raised` for each).
    #[inline]
    pub const fn contains(self, other: Caps) -> bool {
        self.0 & other.0 == other.0
    }

    /// The union of both sets.
    pub const fn union(self, other: Caps) -> Caps {
        Caps(self.0 | other.0)
    }
}

impl std::ops::BitOr for Caps {
    type Output = Caps;
    /// The union ([`Caps::union`]).
    fn bitor(self, other: Caps) -> Caps {
        self.union(other)
    }
}

/// Credentials of a task: user, group, supplementary groups and capabilities.
///
/// `uid` and `gid` are the ids every permission check uses: Linux's effective ids, which
/// are also the filesystem ids (`fsuid`, `fsgid`: uvfs has no `setfsuid`). The real ids
/// matter only to [`faccessat2`](crate::Task::faccessat2) without `AT_EACCESS`, which
/// checks with them; they are `None` when equal to the effective ones (as [`Cred::new`]
/// makes):
///
/// ```
/// use uvfs::{Caps, Cred};
/// let c = Cred::new(1000, 1000, &[27]);
/// let fields = Cred { uid: 1000, gid: 1000, groups: [27].into(), real: None,
///                     caps: Caps::EMPTY, permitted: Caps::EMPTY };
/// assert_eq!(c, fields);
/// assert_eq!(Cred::root().caps, Caps::ALL);
/// ```
///
/// Capabilities are a set ([`Caps`]), checked one by one where Linux checks each
/// (`capable`, `capable_wrt_inode_uidgid`), whatever the uid: [`Cred::new`] and
/// [`Cred::root`] give uid 0 all of them and any other uid none (capabilities(7)), and
/// [`with_caps`](Cred::with_caps) sets them exactly (a root that dropped some, a non-root
/// with ambient ones). uvfs has one user namespace: every capability held counts for every
/// inode (Linux's `privileged_wrt_inode_uidgid` always holds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cred {
    /// Effective (= filesystem) user id.
    pub uid: u32,
    /// Effective (= filesystem) group id.
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Arc<[u32]>,
    /// Real `(uid, gid)` when they differ from the effective ones (`None`: the same).
    pub real: Option<(u32, u32)>,
    /// Effective capabilities (`cap_effective`): the ones every check asks for.
    pub caps: Caps,
    /// Permitted capabilities (`cap_permitted`): what `access(2)` checks with when the real
    /// uid is 0 ([`access_cred`](Cred::access_cred)). Holds `caps` from every constructor.
    pub permitted: Caps,
}

/// `MAY_EXEC`: execute / search permission.
pub const MAY_EXEC: u32 = 1;
/// `MAY_WRITE`: write permission.
pub const MAY_WRITE: u32 = 2;
/// `MAY_READ`: read permission.
pub const MAY_READ: u32 = 4;
/// `MAY_ACCESS` (Linux 0x10): added to the mask by `access(2)` (`do_faccessat`). The mode
/// bits ignore it; a file system that decides permissions itself (the FUSE client without
/// `default_permissions`) asks its server for exactly these checks (`fuse_access`).
pub const MAY_ACCESS: u32 = 0x10;
/// `MAY_CHDIR` (Linux 0x40): added to the search check of `chdir(2)`, `fchdir(2)` and
/// `chroot(2)`; as [`MAY_ACCESS`].
pub const MAY_CHDIR: u32 = 0x40;
/// `MAY_NOT_BLOCK` (Linux 0x80): the check is made on a walk that must not block (pinned
/// in the epoch, Linux's RCU walk); a file system that would block for it (the FUSE
/// client refreshing stale attributes) fails with `ECHILD` instead, and the walk asks
/// again unpinned (`namei::Unlazy`). The mode bits ignore it.
pub(crate) const MAY_NOT_BLOCK: u32 = 0x80;
/// The bits of a mask the mode bits decide: `MAY_READ | MAY_WRITE | MAY_EXEC`.
pub(crate) const MAY_RWX: u32 = MAY_READ | MAY_WRITE | MAY_EXEC;

thread_local! {
    /// The `(uid, gid)` of the credentials of the last call this thread began on a
    /// `Task` or an `OpenFile` that can reach a file system: set first by every path walk
    /// (`Nameidata::new`, `lookup_with`), descriptor lookup (`Task::fdget_raw`), `close`,
    /// `dentry_open` and `dentry_open_exec`, and `OpenFile`'s calls. Linux's
    /// `current_fsuid()`/`current_fsgid()` for the file systems that send them on (a FUSE
    /// request's header). Never restored: each such call sets it before it reaches a file
    /// system; `None` on a thread that made none.
    static CALLER: std::cell::Cell<Option<(u32, u32)>> = const { std::cell::Cell::new(None) };

    /// The `(uid, gid)` of the request this thread serves for another process (uvfs's FUSE
    /// server: the kernel's `fuse_in_header`), which the tasks serving it may not carry
    /// (a handle's table task runs as its opener): while set ([`RequestCaller`]), it is
    /// the caller, whatever [`CALLER`] says.
    static REQUEST: std::cell::Cell<Option<(u32, u32)>> = const { std::cell::Cell::new(None) };
}

/// Records `cred` as this thread's caller (see [`caller`]): one store to a thread-local,
/// no shared line.
#[inline(always)]
pub(crate) fn set_caller(cred: &Cred) {
    // `try_with`: a call made from a thread-local destructor records nothing.
    let _ = CALLER.try_with(|c| c.set(Some((cred.uid, cred.gid))));
}

/// The `(uid, gid)` a file system that sends credentials on sees for the call this thread
/// runs: the request's it serves ([`RequestCaller`]), else its current (or last) `Task`
/// call's; `None` if neither. What a FUSE request's header carries (Linux
/// `fuse_fill_in_header`: `current_fsuid()`, `current_fsgid()`).
pub(crate) fn caller() -> Option<(u32, u32)> {
    let req = REQUEST.try_with(|c| c.get()).ok().flatten();
    req.or_else(|| CALLER.try_with(|c| c.get()).ok().flatten())
}

/// As [`RequestCaller::enter`] without the guard: for a thread that serves requests only,
/// each recorded before it is served (fuser's session threads).
#[cfg(feature = "fuse")]
pub(crate) fn set_request_caller(uid: u32, gid: u32) {
    let _ = REQUEST.try_with(|c| c.set(Some((uid, gid))));
}

/// While alive, the caller of this thread's calls is `(uid, gid)`, the process a request
/// is served for (see [`caller`]); dropping it restores the one before.
#[cfg(feature = "fuse")]
pub(crate) struct RequestCaller(Option<(u32, u32)>);

#[cfg(feature = "fuse")]
impl RequestCaller {
    /// Serves a request of `uid`/`gid` until the guard drops.
    pub(crate) fn enter(uid: u32, gid: u32) -> RequestCaller {
        let before = REQUEST
            .try_with(|c| c.replace(Some((uid, gid))))
            .ok()
            .flatten();
        RequestCaller(before)
    }
}

#[cfg(feature = "fuse")]
impl Drop for RequestCaller {
    fn drop(&mut self) {
        let _ = REQUEST.try_with(|c| c.set(self.0));
    }
}

impl Cred {
    /// root: uid 0, gid 0, no supplementary groups.
    pub fn root() -> Cred {
        Cred {
            uid: 0,
            gid: 0,
            groups: Arc::from(Vec::new()),
            real: None,
            caps: Caps::ALL,
            permitted: Caps::ALL,
        }
    }

    /// Credentials with real = effective `uid` and `gid` and supplementary `groups`, and
    /// the capabilities a task with that uid has by default ([`Caps::for_uid`]: all for 0,
    /// none otherwise).
    pub fn new(uid: u32, gid: u32, groups: &[u32]) -> Cred {
        let caps = Caps::for_uid(uid);
        Cred {
            uid,
            gid,
            groups: Arc::from(groups),
            real: None,
            caps,
            permitted: caps,
        }
    }

    /// These credentials with effective capabilities exactly `caps` (the permitted set
    /// grows to hold them), whatever the uid: a uid 0 whose set was reduced (`capset`,
    /// `setpriv --bounding-set`, `capsh --drop`) is checked with what is left, a non-zero
    /// uid with ambient capabilities with those.
    ///
    /// # References
    /// capset(2), capabilities(7); Linux `cap_capset`.
    pub fn with_caps(mut self, caps: Caps) -> Cred {
        self.caps = caps;
        self.permitted = self.permitted.union(caps);
        self
    }

    /// These credentials with permitted capabilities `permitted` plus the effective ones
    /// (which the permitted set always holds).
    pub fn with_permitted(mut self, permitted: Caps) -> Cred {
        self.permitted = permitted.union(self.caps);
        self
    }

    /// These credentials holding root's capabilities (`CAP_DAC_OVERRIDE`, `CAP_FOWNER`,
    /// `CAP_CHOWN`, `CAP_FSETID`, ...) while `uid`/`gid` still own what they create: for a
    /// caller whose permissions were already checked elsewhere, as the FUSE server's
    /// callers are when the kernel checks them (`default_permissions`).
    ///
    /// # References
    /// Linux `override_creds` with a cred whose `fsuid` is the caller's and whose
    /// capabilities are full (nfsd's `nfsd_setuser` does the reverse: drops them).
    pub fn with_all_caps(self) -> Cred {
        self.with_caps(Caps::ALL)
    }

    /// These credentials without any capability, uid 0 included: the mode bits decide, as
    /// for any other uid (Linux: a task whose effective and permitted sets were emptied).
    pub fn without_caps(mut self) -> Cred {
        self.caps = Caps::EMPTY;
        self.permitted = Caps::EMPTY;
        self
    }

    /// These credentials with real ids `ruid`, `rgid` (as after `setresuid(ruid, uid, _)`
    /// and `setresgid(rgid, gid, _)`).
    pub fn with_real(mut self, ruid: u32, rgid: u32) -> Cred {
        self.real = (ruid != self.uid || rgid != self.gid).then_some((ruid, rgid));
        self
    }

    /// Real user id (`getuid`).
    pub fn ruid(&self) -> u32 {
        self.real.map_or(self.uid, |r| r.0)
    }

    /// Real group id (`getgid`).
    pub fn rgid(&self) -> u32 {
        self.real.map_or(self.gid, |r| r.1)
    }

    /// `access_override_creds`: the credentials `access(2)` checks with: the real ids as
    /// filesystem ids; as effective capabilities, the permitted ones when the real uid is
    /// 0 and none otherwise.
    pub fn access_cred(&self) -> Cred {
        let caps = if self.ruid() == 0 {
            self.permitted
        } else {
            Caps::EMPTY
        };
        Cred {
            uid: self.ruid(),
            gid: self.rgid(),
            groups: self.groups.clone(),
            real: None,
            caps,
            permitted: self.permitted,
        }
    }

    /// `access_need_override_creds`: whether `access(2)` (no `AT_EACCESS`) must check with
    /// [`access_cred`](Self::access_cred) rather than these credentials: the real ids
    /// differ from the effective ones, or the capabilities would change (a non-zero real
    /// uid holding some, a uid 0 whose effective set is not its permitted one).
    #[inline]
    pub fn access_needs_override(&self) -> bool {
        self.real.is_some()
            || if self.uid == 0 {
                self.caps != self.permitted
            } else {
                self.caps != Caps::EMPTY
            }
    }

    /// `capable(cap)` / `capable_wrt_inode_uidgid`: whether the effective set holds every
    /// capability of `cap` (one user namespace: the inode's ids always map).
    #[inline]
    pub fn capable(&self, cap: Caps) -> bool {
        self.caps.contains(cap)
    }

    /// Whether the effective set holds every capability ([`Caps::ALL`]), as root's does by
    /// default. No check asks this; each asks [`capable`](Self::capable) for its own.
    pub fn is_root(&self) -> bool {
        self.caps.contains(Caps::ALL)
    }

    /// `in_group_p`: whether `gid` is the primary or a supplementary group.
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }

    /// `generic_permission`: may this caller access an inode with `mode`, `uid`, `gid` for
    /// `mask` (`MAY_READ | MAY_WRITE | MAY_EXEC`)?
    ///
    /// # Errors
    /// `EACCES` when the mode bits deny and no capability overrides them: on a directory,
    /// `CAP_DAC_READ_SEARCH` passes a mask without `MAY_WRITE` and `CAP_DAC_OVERRIDE` any;
    /// on anything else, `CAP_DAC_READ_SEARCH` passes `MAY_READ` alone and
    /// `CAP_DAC_OVERRIDE` any mask but one with `MAY_EXEC` on a file with no execute bit.
    #[inline]
    pub fn permission(&self, mode: u32, uid: u32, gid: u32, mask: u32) -> crate::Result<()> {
        // Inline: the owner granted by the owner bits (every walk step and open checks one);
        // any other case is decided from the start out of line.
        if self.uid == uid && mask & !((mode >> 6) & 7) == 0 {
            return Ok(());
        }
        self.permission_slow(mode, uid, gid, mask)
    }

    /// [`permission`](Self::permission) past its inline case.
    #[inline(never)]
    fn permission_slow(&self, mode: u32, uid: u32, gid: u32, mask: u32) -> crate::Result<()> {
        let bits = if self.uid == uid {
            mode >> 6
        } else if self.in_group(gid) {
            mode >> 3
        } else {
            mode
        } & 7;
        if mask & !bits == 0 {
            return Ok(());
        }
        // generic_permission past acl_permission_check.
        let mask = mask & (MAY_READ | MAY_WRITE | MAY_EXEC);
        if mode & crate::types::S_IFMT == crate::types::S_IFDIR {
            // DACs are overridable for directories.
            if mask & MAY_WRITE == 0 && self.capable(Caps::DAC_READ_SEARCH) {
                return Ok(());
            }
            if self.capable(Caps::DAC_OVERRIDE) {
                return Ok(());
            }
            return Err(crate::Errno::EACCES);
        }
        if mask == MAY_READ && self.capable(Caps::DAC_READ_SEARCH) {
            return Ok(());
        }
        // Read/write always overridable; execute when at least one execute bit is set.
        if (mask & MAY_EXEC == 0 || mode & 0o111 != 0) && self.capable(Caps::DAC_OVERRIDE) {
            return Ok(());
        }
        Err(crate::Errno::EACCES)
    }

    /// `inode_owner_or_capable`: the caller owns the inode (fsuid = its `uid`) or holds
    /// `CAP_FOWNER`.
    pub fn owner_or_capable(&self, uid: u32) -> bool {
        self.uid == uid || self.capable(Caps::FOWNER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{S_IFDIR, S_IFREG};

    #[test]
    fn real_ids() {
        let c = Cred::new(1000, 100, &[7]);
        assert_eq!((c.ruid(), c.rgid(), c.real), (1000, 100, None));
        assert_eq!(c.clone().with_real(1000, 100), c, "equal ids stay None");
        let setuid_root = Cred::new(0, 0, &[7]).with_real(1000, 100);
        assert!(setuid_root.capable(Caps::DAC_OVERRIDE));
        let a = setuid_root.access_cred();
        assert_eq!((a.uid, a.gid, &*a.groups), (1000, 100, &[7][..]));
        assert_eq!(
            a.caps,
            Caps::EMPTY,
            "access() drops capabilities for a real uid other than 0"
        );
        // setresuid(-1, 1000, -1) by root: effective set cleared, permitted kept; access()
        // checks as real uid 0 with the permitted set.
        let dropped = Cred::new(1000, 100, &[])
            .with_real(0, 0)
            .with_permitted(Caps::ALL);
        assert_eq!(dropped.caps, Caps::EMPTY);
        assert!(dropped.access_needs_override());
        assert_eq!(dropped.access_cred().caps, Caps::ALL);
        // A non-root uid with ambient capabilities: access() ignores them.
        let ambient = Cred::new(1000, 100, &[]).with_caps(Caps::DAC_OVERRIDE);
        assert!(ambient.access_needs_override());
        assert_eq!(ambient.access_cred().caps, Caps::EMPTY);
        assert!(!Cred::root().access_needs_override());
        assert!(!Cred::new(1000, 100, &[]).access_needs_override());
    }

    #[test]
    fn defaults_per_uid() {
        assert_eq!(Cred::root().caps, Caps::ALL);
        assert_eq!(Cred::new(0, 5, &[]).caps, Caps::ALL);
        assert_eq!(Cred::new(1, 5, &[]).caps, Caps::EMPTY);
        let partial = Cred::root().with_caps(Caps::FOWNER);
        assert_eq!((partial.caps, partial.permitted), (Caps::FOWNER, Caps::ALL));
        assert_eq!(Cred::root().without_caps().permitted, Caps::EMPTY);
        assert_eq!(
            Caps::ALL.0,
            0x1ff_ffff_ffff,
            "CapEff of root on Linux >= 5.9"
        );
    }

    /// generic_permission's overrides, one capability at a time (fs/namei.c): a file and a
    /// directory owned by uid 1 mode 000 (and a file with the owner's execute bit), checked by uid
    /// 0 holding only the named capability.
    #[test]
    fn permission_per_capability() {
        let only = |c: Caps| Cred::root().with_caps(c);
        let check = |c: &Cred, mode: u32, mask: u32| c.permission(mode, 1, 1, mask).is_ok();
        let (reg, dir, regx) = (S_IFREG, S_IFDIR, S_IFREG | 0o100);
        let rs = only(Caps::DAC_READ_SEARCH);
        assert!(check(&rs, reg, MAY_READ));
        assert!(!check(&rs, reg, MAY_WRITE), "no write to a file");
        assert!(!check(&rs, reg, MAY_READ | MAY_WRITE));
        assert!(!check(&rs, regx, MAY_EXEC), "no execute");
        assert!(
            check(&rs, dir, MAY_READ | MAY_EXEC),
            "read and search a directory"
        );
        assert!(
            !check(&rs, dir, MAY_WRITE | MAY_EXEC),
            "no write to a directory"
        );
        let ov = only(Caps::DAC_OVERRIDE);
        assert!(check(&ov, reg, MAY_READ));
        assert!(check(&ov, reg, MAY_READ | MAY_WRITE));
        assert!(check(&ov, regx, MAY_EXEC));
        assert!(!check(&ov, reg, MAY_EXEC), "no execute bit at all");
        assert!(check(&ov, dir, MAY_WRITE | MAY_EXEC));
        for c in [Caps::CHOWN, Caps::FOWNER, Caps::FSETID, Caps::EMPTY] {
            let c = only(c);
            assert!(
                !check(&c, reg, MAY_READ) && !check(&c, dir, MAY_EXEC),
                "{c:?}"
            );
        }
        // The mode bits still grant without any capability.
        assert!(check(&only(Caps::EMPTY), S_IFREG | 0o004, MAY_READ));
        let fowner = only(Caps::FOWNER);
        assert!(fowner.owner_or_capable(1) && !only(Caps::DAC_OVERRIDE).owner_or_capable(1));
    }
}
