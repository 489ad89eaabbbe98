//! `Cred`: a task's credentials, and the permission check on an inode.
//!
//! Linux analogue: `include/linux/cred.h`, `fs/namei.c` `generic_permission`,
//! `acl_permission_check`, `capable_wrt_inode_uidgid`.

use std::sync::Arc;

/// Credentials of a task: user, group and supplementary groups.
///
/// uid 0 has the capabilities root has by default: `CAP_DAC_OVERRIDE`,
/// `CAP_DAC_READ_SEARCH`, `CAP_FOWNER`, `CAP_FSETID`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cred {
    /// User id (real = effective = filesystem uid).
    pub uid: u32,
    /// Group id (real = effective = filesystem gid).
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Arc<[u32]>,
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
        }
    }

    /// Whether this is the superuser (holds the default root capabilities).
    #[inline]
    pub fn is_root(&self) -> bool {
        self.uid == 0
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
    pub fn permission(&self, mode: u32, uid: u32, gid: u32, mask: u32) -> crate::Result<()> {
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
