//! The program's credentials: each thread's ids, groups and capabilities as the kernel has
//! them drive the permission checks of the uvfs task that serves the thread's calls.
//!
//! Linux analogue: the per-thread `struct cred` (include/linux/cred.h) that
//! `generic_permission` and `capable_wrt_inode_uidgid` read through `current_cred()`:
//! `fsuid`, `fsgid`, `group_info`, `cap_effective`; replaced only by the thread itself
//! (`commit_creds` in kernel/sys.c `__sys_setresuid` and the rest, kernel/groups.c
//! `setgroups`, kernel/capability.c `capset`, fs/exec.c `begin_new_exec`, user namespaces).
//!
//! How the supervisor follows them: the calls that change the calling thread's credentials
//! ([`CRED_CALLS`]) are notified and let through (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`: the
//! kernel makes the change itself from the thread's own arguments, so there is nothing for
//! a racing thread to swap between a check and a use); the thread's credentials are marked
//! stale and read again from `/proc/TID/status` at its next notified call, before that call
//! is served. A thread blocked in a notified call cannot have its credentials changed (only
//! the thread itself commits new ones), so what is read then is what the kernel checks
//! with. An `execve` (capabilities are recomputed) and `unshare(CLONE_NEWUSER)` mark them
//! stale too; a new thread or process is read at its first call (the supervisor reads its
//! status then anyway).
//!
//! Invariant ([`ThreadCreds`]): when a call of thread `tid` is served, its task's `Cred`
//! equals the credentials the kernel has for `tid` at that moment.
//!
//! Cost: none on a call of the thread whose credentials the task already carries (one
//! compare); a map lookup when another thread of the same task calls (threads sharing a
//! descriptor table share a task); one `/proc` read per credential change.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::sync::OnceLock;

use uvfs::{Cred, Task};

/// The calls that change the calling thread's credentials (kernel/sys.c, kernel/groups.c,
/// kernel/capability.c; `setns` into a user namespace, kernel/user_namespace.c).
pub(crate) const CRED_CALLS: [libc::c_long; 11] = [
    libc::SYS_setuid,
    libc::SYS_setgid,
    libc::SYS_setreuid,
    libc::SYS_setregid,
    libc::SYS_setresuid,
    libc::SYS_setresgid,
    libc::SYS_setfsuid,
    libc::SYS_setfsgid,
    libc::SYS_setgroups,
    libc::SYS_capset,
    libc::SYS_setns,
];

/// Whether syscall `nr` is one of [`CRED_CALLS`] (asked at every notified call: a
/// `match`, which compiles to a bit test, rather than a scan of the list).
#[inline]
#[allow(non_upper_case_globals)] // libc's SYS_* names in the pattern
pub(crate) fn is_cred_call(nr: libc::c_long) -> bool {
    use libc::*;
    matches!(
        nr,
        SYS_setuid
            | SYS_setgid
            | SYS_setreuid
            | SYS_setregid
            | SYS_setresuid
            | SYS_setresgid
            | SYS_setfsuid
            | SYS_setfsgid
            | SYS_setgroups
            | SYS_capset
            | SYS_setns
    )
}

/// The effective capabilities that make a uid other than 0 hold root's file capabilities
/// in uvfs ([`Cred::all_caps`]): `CAP_CHOWN`, `CAP_DAC_OVERRIDE`, `CAP_DAC_READ_SEARCH`,
/// `CAP_FOWNER`, `CAP_FSETID` (bits 0-4, include/uapi/linux/capability.h). uvfs's `Cred`
/// holds these all or none, so a thread with only some of them gets none.
const FS_CAPS: u64 = 0x1f;

/// How many threads' credentials a task remembers; past it the map is emptied (each
/// thread's are read again at its next call), so threads that exited leave no lasting
/// entries.
const MAX_KNOWN: usize = 1024;

/// The credentials of the threads a uvfs task serves (one process's threads, or one
/// thread with a table of its own), and which of them the task carries now.
#[derive(Debug, Default)]
pub(crate) struct ThreadCreds {
    /// Thread id -> its credentials as last read; no entry: unknown or stale.
    known: HashMap<i32, Cred>,
    /// The thread whose credentials the task carries now; 0: none (read at the next call).
    current: i32,
}

impl ThreadCreds {
    /// Credentials of thread `tid` read at its first call (from the status text the
    /// supervisor read to place it).
    pub(crate) fn seen(&mut self, tid: i32, cred: Cred) {
        if self.known.len() >= MAX_KNOWN {
            self.known.clear();
        }
        self.known.insert(tid, cred);
        if self.current == tid {
            self.current = 0;
        }
    }

    /// For a task that already carries thread `tid`'s credentials `cred` (the task a thread
    /// gets when it leaves its process's descriptor table, cloned while serving it).
    pub(crate) fn carried(tid: i32, cred: Cred) -> ThreadCreds {
        ThreadCreds {
            known: HashMap::from([(tid, cred)]),
            current: tid,
        }
    }

    /// Thread `tid` is changing its credentials: read them again at its next call.
    pub(crate) fn stale(&mut self, tid: i32) {
        self.known.remove(&tid);
        if self.current == tid {
            self.current = 0;
        }
    }

    /// Every thread's credentials may have changed (after an `execve`).
    pub(crate) fn all_stale(&mut self) {
        self.known.clear();
        self.current = 0;
    }

    /// Makes `task` carry thread `tid`'s credentials for the call it is about to serve.
    /// `live` says whether the call is still pending (checked after a `/proc` read, so
    /// that a recycled thread id is never believed).
    ///
    /// # Errors
    /// `ESRCH` when the thread has gone (its status cannot be read, or the call is no
    /// longer pending).
    #[inline]
    pub(crate) fn apply(
        &mut self,
        task: &mut Task,
        tid: i32,
        live: impl FnOnce() -> bool,
    ) -> Result<(), i32> {
        if tid == self.current {
            return Ok(());
        }
        self.switch(task, tid, live)
    }

    /// [`apply`](Self::apply)'s slow path: another thread, or credentials to read.
    #[cold]
    fn switch(
        &mut self,
        task: &mut Task,
        tid: i32,
        live: impl FnOnce() -> bool,
    ) -> Result<(), i32> {
        let cred = match self.known.get(&tid) {
            Some(c) => c.clone(),
            None => {
                let c = read(tid).ok_or(libc::ESRCH)?;
                if !live() {
                    return Err(libc::ESRCH);
                }
                self.seen(tid, c.clone());
                c
            }
        };
        // Threads with equal credentials share the task's credential identity (Linux gives
        // each thread's `commit_creds` its own; uvfs compares identities only for
        // `linkat(AT_EMPTY_PATH)` without `CAP_DAC_READ_SEARCH`).
        if *task.cred() != cred {
            task.set_cred(cred);
        }
        self.current = tid;
        Ok(())
    }
}

/// Thread `tid`'s credentials from `/proc/TID/status`, `None` when it has gone.
pub(crate) fn read(tid: i32) -> Option<Cred> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    parse(&status, || same_user_ns(tid))
}

/// Credentials from the text of `/proc/TID/status` (read by a process in the initial user
/// namespace or the program's parent one: ids as that namespace maps them): filesystem ids
/// for every check (uvfs's `uid`, `gid`), the real ids for `access`, the supplementary
/// groups, and [`Cred::all_caps`] when the effective set holds [`FS_CAPS`] and the thread
/// is in the supervisor's user namespace (`in_ns`: capabilities held in a namespace of the
/// program's own do not cover files owned outside it; conservatively none then).
pub(crate) fn parse(status: &str, in_ns: impl FnOnce() -> bool) -> Option<Cred> {
    let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name));
    let ids = |name: &str| -> Option<[u32; 4]> {
        let mut it = field(name)?.split_whitespace().map(|v| v.parse::<u32>());
        let mut out = [0; 4];
        for o in &mut out {
            *o = it.next()?.ok()?;
        }
        Some(out)
    };
    // Uid:/Gid: real, effective, saved, filesystem.
    let [ruid, _, _, fsuid] = ids("Uid:")?;
    let [rgid, _, _, fsgid] = ids("Gid:")?;
    let groups: Vec<u32> = field("Groups:")?
        .split_whitespace()
        .map(|g| g.parse().ok())
        .collect::<Option<_>>()?;
    let cap_eff = u64::from_str_radix(field("CapEff:")?.trim(), 16).ok()?;
    let mut cred = Cred::new(fsuid, fsgid, &groups).with_real(ruid, rgid);
    let full = cap_eff & FS_CAPS == FS_CAPS && in_ns();
    if fsuid != 0 && full {
        cred = cred.with_all_caps();
    } else if fsuid == 0 && !full {
        // A uid 0 without them (dropped, or root only in a namespace of its own): the mode
        // bits decide, never more than Linux allows (a partial set gets none).
        cred = cred.without_caps();
    }
    Some(cred)
}

/// Whether thread `tid` is in the supervisor's user namespace.
pub(crate) fn same_user_ns(tid: i32) -> bool {
    let ino = |p: &str| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    static OURS: OnceLock<Option<(u64, u64)>> = OnceLock::new();
    let ours = *OURS.get_or_init(|| ino("/proc/self/ns/user"));
    ours.is_some() && ino(&format!("/proc/{tid}/ns/user")) == ours
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = "Name:\tsh\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\n\
                        CapEff:\t000001ffffffffff\n";

    #[test]
    fn cred_calls_are_the_list() {
        for nr in 0..1024 {
            assert_eq!(is_cred_call(nr), CRED_CALLS.contains(&nr), "syscall {nr}");
        }
    }

    #[test]
    fn root_and_dropped() {
        let c = parse(ROOT, || true).unwrap();
        assert_eq!(c, Cred::new(0, 0, &[]));
        assert!(c.is_root());
        // setpriv --reuid=1000 --regid=1000 --groups=27,2000: the kernel cleared CapEff.
        let s = "Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n\
                 Groups:\t27 2000 \nCapEff:\t0000000000000000\n";
        let c = parse(s, || true).unwrap();
        assert_eq!(c, Cred::new(1000, 1000, &[27, 2000]));
        assert!(!c.is_root() && c.in_group(2000));
    }

    #[test]
    fn fs_ids_real_ids_and_caps() {
        // setfsuid(1000) by root: fs ids check, the real ones answer access().
        let s = "Uid:\t0\t0\t0\t1000\nGid:\t0\t0\t0\t0\nGroups:\t0\nCapEff:\t000001ffffffffe0\n";
        let c = parse(s, || true).unwrap();
        assert_eq!((c.uid, c.gid, c.ruid(), c.is_root()), (1000, 0, 0, false));
        // Ambient capabilities kept over a uid change: all of root's file capabilities.
        let s = "Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nGroups:\t\n\
                 CapEff:\t000000000000001f\n";
        assert!(parse(s, || true).unwrap().all_caps);
        assert!(
            !parse(s, || false).unwrap().all_caps,
            "another user namespace"
        );
        let partial = s.replace("001f", "0002");
        assert!(
            !parse(&partial, || true).unwrap().all_caps,
            "some of them: none"
        );
        // uid 0 without CAP_DAC_OVERRIDE (capsh --drop, setpriv --bounding-set): the mode
        // bits decide for it; in a user namespace of its own, the same.
        let dropped = ROOT.replace("1ffffffffff", "1fffffffffd");
        let c = parse(&dropped, || true).unwrap();
        assert!(c.no_caps && !c.is_root());
        assert!(!parse(ROOT, || false).unwrap().is_root());
        assert!(parse("Uid:\t1\n", || true).is_none());
    }
}
