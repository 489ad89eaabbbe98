//! `Cred`: a task's credentials, and the permission check on an inode.
//!
//! Linux analogue: `include/linux/cred.h`, `fs/namei.c` `generic_permission`,
//! `acl_permission_check`, `capable_wrt_inode_uidgid`.

use std::sync::Arc;

/// Credentials of a task: user, group and supplementary groups.
///
/// `uid` and `gid` are the ids every permission check uses: Linux's effective ids, which
/// are also the filesystem ids (`fsuid`, `fsgid`: uvfs has no `setfsuid`). The real ids
/// matter only to [`faccessat2`](crate::Task::faccessat2) without `AT_EACCESS`, which
/// checks with them; they are `None` when equal to the effective ones (as [`Cred::new`]
/// makes):
///
/// ```
/// use uvfs::Cred;
/// let c = Cred::new(1000, 1000, &[27]);
/// let fields = Cred { uid: 1000, gid: 1000, groups: [27].into(), real: None,
///                     all_caps: false, no_caps: false };
/// assert_eq!(c, fields);
/// ```
///
/// An effective uid 0 has the capabilities root has by default: `CAP_DAC_OVERRIDE`,
/// `CAP_DAC_READ_SEARCH`, `CAP_FOWNER`, `CAP_FSETID`, `CAP_CHOWN` (a task that changed
/// its effective uid from 0 to another keeps none in its effective set, as Linux's
/// `setresuid` clears them), unless [`without_caps`](Cred::without_caps) says its
/// effective set lacks them.
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
    /// Holds root's capabilities whatever `uid` is ([`with_all_caps`](Self::with_all_caps));
    /// `false` from every other constructor: then only uid 0 holds them.
    pub all_caps: bool,
    /// A uid 0 that does not hold root's capabilities ([`without_caps`](Self::without_caps)):
    /// its effective set lacks them (Linux: `capset`, `capsh --drop=...`, or a uid 0 that
    /// only maps to root in a user namespace of its own). `false` from every constructor.
    pub no_caps: bool,
}

/// `MAY_EXEC`: execute / search permission.
pub const MAY_EXEC: u32 = 1;
/// `MAY_WRITE`: write permission.
pub const MAY_WRITE: u32 = 2;
/// `MAY_READ`: read permission.
pub const MAY_READ: u32 = 4;

impl Cred {
    /// root: uid 0, gid 0, no supplementary groups.
    pub fn root() -> Cred {
        Cred {
            uid: 0,
            gid: 0,
            groups: Arc::from(Vec::new()),
            real: None,
            all_caps: false,
            no_caps: false,
        }
    }

    /// Credentials with real = effective `uid` and `gid` and supplementary `groups`.
    pub fn new(uid: u32, gid: u32, groups: &[u32]) -> Cred {
        Cred {
            uid,
            gid,
            groups: Arc::from(groups),
            real: None,
            all_caps: false,
            no_caps: false,
        }
    }

    /// These credentials holding root's capabilities (`CAP_DAC_OVERRIDE`, `CAP_FOWNER`,
    /// `CAP_CHOWN`, `CAP_FSETID`, ...) while `uid`/`gid` still own what they create: for a
    /// caller whose permissions were already checked elsewhere, as the FUSE server's
    /// callers are when the kernel checks them (`default_permissions`).
    ///
    /// # References
    /// Linux `override_creds` with a cred whose `fsuid` is the caller's and whose
    /// capabilities are full (nfsd's `nfsd_setuser` does the reverse: drops them).
    pub fn with_all_caps(mut self) -> Cred {
        self.all_caps = true;
        self
    }

    /// These credentials without root's capabilities even for uid 0: the mode bits decide,
    /// as for any other uid (Linux: a uid 0 whose effective capability set was emptied).
    pub fn without_caps(mut self) -> Cred {
        self.no_caps = true;
        self.all_caps = false;
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
    /// filesystem ids, and root's capabilities only when the real uid is 0 (or when these
    /// credentials hold them whatever the uid, [`with_all_caps`](Self::with_all_caps)).
    pub fn access_cred(&self) -> Cred {
        Cred {
            uid: self.ruid(),
            gid: self.rgid(),
            groups: self.groups.clone(),
            real: None,
            all_caps: self.all_caps,
            no_caps: self.no_caps,
        }
    }

    /// Whether this caller holds root's capabilities: uid 0 (unless
    /// [`no_caps`](Self::no_caps)), or [`all_caps`](Self::all_caps).
    #[inline]
    pub fn is_root(&self) -> bool {
        (self.uid == 0 && !self.no_caps) || self.all_caps
    }

    /// `in_group_p`: whether `gid` is the primary or a supplementary group.
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }

    /// `generic_permission`: may this caller access an inode with `mode`, `uid`, `gid` for
    /// `mask` (`MAY_READ | MAY_WRITE | MAY_EXEC`)?
    ///
    /// # Errors
    /// `EACCES` when the mode bits deny and no capability overrides them. Root passes
    /// everything except `MAY_EXEC` on a non-directory with no execute bit at all.
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
        if self.is_root() {
            let is_dir = mode & crate::types::S_IFMT == crate::types::S_IFDIR;
            if mask & MAY_EXEC == 0 || is_dir || mode & 0o111 != 0 {
                return Ok(());
            }
        }
        Err(crate::Errno::EACCES)
    }

    /// `inode_owner_or_capable`: the caller owns the inode or is root (`CAP_FOWNER`).
    pub fn owner_or_capable(&self, uid: u32) -> bool {
        self.uid == uid || self.is_root()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_ids() {
        let c = Cred::new(1000, 100, &[7]);
        assert_eq!((c.ruid(), c.rgid(), c.real), (1000, 100, None));
        assert_eq!(c.clone().with_real(1000, 100), c, "equal ids stay None");
        let setuid_root = Cred::new(0, 0, &[7]).with_real(1000, 100);
        assert!(setuid_root.is_root());
        let a = setuid_root.access_cred();
        assert_eq!((a.uid, a.gid, &*a.groups), (1000, 100, &[7][..]));
        assert!(
            !a.is_root(),
            "access() drops capabilities for a real uid other than 0"
        );
        let dropped = Cred::new(1000, 100, &[]).with_real(0, 0);
        assert!(dropped.access_cred().is_root());
    }
}
