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

use uvfs::{Caps, Cred, Task};

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

/// How many threads' credentials a task remembers; past it the map is emptied (each
/// thread's are read again at its next call), so threads that exited leave no lasting
/// entries.
const MAX_KNOWN: usize = 1024;

/// What a task knows of one thread's credentials.
#[derive(Debug)]
struct Known {
    /// As last read from `/proc/TID/status`.
    cred: Cred,
    /// Its credential identity ([`Task::cred_id`]); 0: none yet (drawn or adopted at the
    /// thread's first call served).
    id: u64,
    /// `false` after a credential call: read again at the thread's next call.
    fresh: bool,
}

/// The credentials of the threads a uvfs task serves (one process's threads, or one
/// thread with a table of its own), and which of them the task carries now.
#[derive(Debug, Default)]
pub(crate) struct ThreadCreds {
    /// Thread id -> its credentials and their identity; no entry: unknown.
    known: HashMap<i32, Known>,
    /// The thread whose credentials the task carries now; 0: none (read at the next call).
    current: i32,
}

impl ThreadCreds {
    /// Credentials of thread `tid` read at its first call (from the status text the
    /// supervisor read to place it, while `tid` waited in that call). An entry left by an
    /// earlier thread with the same id is replaced.
    pub(crate) fn seen(&mut self, tid: i32, cred: Cred) {
        if self.known.len() >= MAX_KNOWN && !self.known.contains_key(&tid) {
            self.known.clear();
            self.current = 0;
        }
        self.known.insert(
            tid,
            Known {
                cred,
                id: 0,
                fresh: true,
            },
        );
        if self.current == tid {
            self.current = 0;
        }
    }

    /// For a task that already carries thread `tid`'s credentials (the task a thread gets
    /// when it leaves its process's descriptor table, cloned while serving it).
    pub(crate) fn carried(tid: i32, task: &Task) -> ThreadCreds {
        let k = Known {
            cred: task.cred().clone(),
            id: task.cred_id(),
            fresh: true,
        };
        ThreadCreds {
            known: HashMap::from([(tid, k)]),
            current: tid,
        }
    }

    /// Thread `tid` is changing its credentials: read them again at its next call.
    pub(crate) fn stale(&mut self, tid: i32) {
        if let Some(k) = self.known.get_mut(&tid) {
            k.fresh = false;
        }
        if self.current == tid {
            self.current = 0;
        }
    }

    /// Every thread's credentials may have changed (after an `execve`).
    pub(crate) fn all_stale(&mut self) {
        for k in self.known.values_mut() {
            k.fresh = false;
        }
        self.current = 0;
    }

    /// Thread `tid` has exited (its id may be reused by a thread of any process).
    pub(crate) fn forget(&mut self, tid: i32) {
        self.known.remove(&tid);
        if self.current == tid {
            self.current = 0;
        }
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
    ///
    /// Identities (Linux: the `struct cred` a thread's calls see, compared only by
    /// `linkat(AT_EMPTY_PATH)` here): a thread keeps its identity while its credentials are
    /// unchanged, across calls of other threads; at its first call it shares the task's
    /// when its credentials are the task's (a new thread shares its creator's `struct
    /// cred` until it commits its own), else draws a new one; after a credential call it
    /// keeps its identity when what is read again is equal (the call changed nothing, or
    /// failed), else draws a new one.
    #[cold]
    fn switch(
        &mut self,
        task: &mut Task,
        tid: i32,
        live: impl FnOnce() -> bool,
    ) -> Result<(), i32> {
        let fresh = self.known.get(&tid).is_some_and(|k| k.fresh);
        if !fresh {
            let c = read(tid).ok_or(libc::ESRCH)?;
            if !live() {
                return Err(libc::ESRCH);
            }
            match self.known.get_mut(&tid) {
                Some(k) if k.cred == c => k.fresh = true,
                _ => self.seen(tid, c),
            }
        }
        let Some(k) = self.known.get_mut(&tid) else {
            // `seen` just inserted it.
            return Err(libc::ESRCH);
        };
        if k.id == 0 {
            if *task.cred() == k.cred {
                k.id = task.cred_id();
            } else {
                task.set_cred(k.cred.clone());
                k.id = task.cred_id();
            }
        }
        if task.cred_id() != k.id {
            task.set_cred_with_id(k.cred.clone(), k.id);
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
/// groups, and the capabilities exactly as `CapEff:` and `CapPrm:` give them when the
/// thread is in the supervisor's user namespace (`in_ns`). In a user namespace of the
/// program's own they count for none: Linux's `capable_wrt_inode_uidgid` asks them of
/// that namespace and only for inodes whose owner and group map into it
/// (`privileged_wrt_inode_uidgid`), which uvfs does not model; so fewer rights than Linux
/// there, never more.
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
    let mask = |name: &str| u64::from_str_radix(field(name)?.trim(), 16).ok();
    // Uid:/Gid: real, effective, saved, filesystem.
    let [ruid, _, _, fsuid] = ids("Uid:")?;
    let [rgid, _, _, fsgid] = ids("Gid:")?;
    let groups: Vec<u32> = field("Groups:")?
        .split_whitespace()
        .map(|g| g.parse().ok())
        .collect::<Option<_>>()?;
    let (eff, prm) = (mask("CapEff:")?, mask("CapPrm:")?);
    let (eff, prm) = if (eff | prm) != 0 && !in_ns() {
        (0, 0)
    } else {
        (eff, prm)
    };
    Some(
        Cred::new(fsuid, fsgid, &groups)
            .with_real(ruid, rgid)
            .without_caps()
            .with_caps(Caps(eff))
            .with_permitted(Caps(prm)),
    )
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
                        CapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\n";

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
        assert_eq!(c.caps, Caps::ALL);
        // setpriv --reuid=1000 --regid=1000 --groups=27,2000: the kernel cleared CapEff.
        let s = "Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n\
                 Groups:\t27 2000 \nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n";
        let c = parse(s, || panic!("no capability: the namespace is not asked")).unwrap();
        assert_eq!(c, Cred::new(1000, 1000, &[27, 2000]));
        assert!(c.caps == Caps::EMPTY && c.in_group(2000));
    }

    #[test]
    fn fs_ids_real_ids_and_caps() {
        // setfsuid(1000) by root: fs ids check, the real ones answer access(); the kernel
        // cleared the five file capabilities from the effective set only.
        let s = "Uid:\t0\t0\t0\t1000\nGid:\t0\t0\t0\t0\nGroups:\t0\n\
                 CapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffe0\n";
        let c = parse(s, || true).unwrap();
        assert_eq!((c.uid, c.gid, c.ruid()), (1000, 0, 0));
        assert!(!c.capable(Caps::DAC_OVERRIDE) && c.capable(Caps::SYS_ADMIN));
        assert_eq!(
            c.access_cred().caps,
            Caps::ALL,
            "access(): real uid 0, permitted"
        );
        // Ambient capabilities kept over a uid change.
        let s = "Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nGroups:\t\n\
                 CapPrm:\t000000000000001f\nCapEff:\t000000000000001f\n";
        let c = parse(s, || true).unwrap();
        assert_eq!((c.uid, c.caps), (1000, Caps(0x1f)));
        assert_eq!(
            parse(s, || false).unwrap().caps,
            Caps::EMPTY,
            "another user namespace"
        );
        // Some of them: exactly those (issue 12 B1: a partial set used to give none).
        let partial = s.replace(
            "001f\nCapEff:\t000000000000001f",
            "001f\nCapEff:\t0000000000000002",
        );
        let c = parse(&partial, || true).unwrap();
        assert_eq!((c.caps, c.permitted), (Caps::DAC_OVERRIDE, Caps(0x1f)));
        // uid 0 without CAP_CHOWN (setpriv --bounding-set=-chown): all the others.
        let dropped = ROOT.replace("CapEff:\t000001ffffffffff", "CapEff:\t000001fffffffffe");
        let c = parse(&dropped, || true).unwrap();
        assert!(!c.capable(Caps::CHOWN) && c.capable(Caps::DAC_OVERRIDE | Caps::FOWNER));
        // uid 0 in a user namespace of its own: none.
        assert_eq!(parse(ROOT, || false).unwrap().caps, Caps::EMPTY);
        assert!(parse("Uid:\t1\n", || true).is_none());
        assert!(parse(&ROOT.replace("CapPrm:\t000001ffffffffff\n", ""), || true).is_none());
    }

    /// Issue 12 B3: a thread keeps its credential identity while other threads' calls
    /// are served in between; a new identity only when its credentials change.
    #[test]
    fn identity_kept_across_thread_switches() {
        let mnt = uvfs::tmpfs::mount(Default::default());
        let mut task = Task::init(&mnt);
        let (a, b) = (101, 102);
        let mut tc = ThreadCreds::default();
        tc.seen(a, Cred::new(0, 0, &[]));
        tc.seen(b, Cred::new(1000, 1000, &[]));
        tc.apply(&mut task, a, || true).unwrap();
        let id_a = task.cred_id();
        tc.apply(&mut task, b, || true).unwrap();
        let id_b = task.cred_id();
        assert_ne!(id_a, id_b);
        assert_eq!(task.cred().uid, 1000);
        for _ in 0..3 {
            tc.apply(&mut task, a, || true).unwrap();
            assert_eq!((task.cred_id(), task.cred().uid), (id_a, 0));
            tc.apply(&mut task, b, || true).unwrap();
            assert_eq!((task.cred_id(), task.cred().uid), (id_b, 1000));
        }
        // A thread with the task's credentials at its first call shares their identity.
        tc.seen(103, Cred::new(1000, 1000, &[]));
        tc.apply(&mut task, 103, || true).unwrap();
        assert_eq!(task.cred_id(), id_b);
        // An exited thread is forgotten (issue 12 B5).
        tc.forget(b);
        assert!(!tc.known.contains_key(&b));
    }
}
