//! File locks: POSIX record locks (`fcntl` `F_GETLK`/`F_SETLK`/`F_SETLKW`, their
//! open-file-description forms `F_OFD_*`) and `flock(2)` locks, kept per inode in the VFS,
//! so that they work alike on every file system behind the seam.
//!
//! Linux analogue: fs/locks.c (`fcntl_getlk`, `fcntl_setlk`, `flock_to_posix_lock`,
//! `posix_test_lock`, `posix_lock_inode`, `posix_locks_deadlock`, `flock_lock_inode`,
//! `locks_remove_posix`, `locks_remove_file`), `struct file_lock_context`.
//!
//! # Design
//! - An inode's locks live in a [`FileLockContext`] allocated at its first lock request
//!   (`Inode::i_flctx`, a `OnceBox`, sync/once_box.rs, as Linux's lazily allocated
//!   `i_flctx`): an inode that never saw a lock costs one pointer load on `close` (which must
//!   drop the closer's POSIX locks, `locks_remove_posix`) and at the last close of a file
//!   (`locks_remove_file`), and nothing on open, read or write.
//! - A context is one mutex over two lists (POSIX records, `flock` locks) and one condition
//!   variable its waiters sleep on; every change that may grant a waiter wakes them all, and
//!   each re-runs its request (Linux's waiters also re-run `posix_lock_inode` when woken).
//! - Owners. Classic POSIX locks: the descriptor table (Linux `current->files`): threads
//!   sharing a table share them, a `fork` child has its own; they go when their owner closes
//!   ANY descriptor of the inode, and when the table goes. OFD locks and `flock` locks: the
//!   open file (`File`), shared by `dup` and `fork`; they go at its last close.
//! - Deadlock detection (`EDEADLK`) among classic owners about to sleep in `F_SETLKW`: a
//!   table of who waits for whom (`BLOCKED`, Linux's `blocked_hash` under
//!   `blocked_lock_lock`), global as Linux's, written by a request that must sleep and
//!   cleared of a context's sleepers at every change of that context that wakes them (as
//!   Linux's unlock takes its waiters out of `blocked_hash`).
//! - Sleeping waits end with `EINTR` when the waiting thread's
//!   [`Interrupter`](crate::Interrupter) fires (uvfs has no signals; fuse/client/interrupt.rs).
//! - hostfs: the locks are uvfs's own, not taken on the host file (other host processes do
//!   not see them), as Linux's FUSE client keeps locks locally when its server has none.
//!
//! Lock order: a context's `state` -> `BLOCKED` (a leaf). An interrupter's slot lock is taken
//! before a context's `state` (interrupt.rs); neither is taken under a descriptor table's
//! `file_lock`.

use crate::errno::{Errno, Result};
use crate::file::{FMode, File};
use crate::fs::Inode;
use crate::fuse::client::interrupt::LockWait;
use crate::sync::{plain, wait};
use crate::task::Task;
use crate::types::{Fd, SEEK_CUR, SEEK_END, SEEK_SET};
use crate::variant::Variant;
use std::fmt;

/// `F_RDLCK`: a shared (read) lock.
pub const F_RDLCK: i16 = 0;
/// `F_WRLCK`: an exclusive (write) lock.
pub const F_WRLCK: i16 = 1;
/// `F_UNLCK`: no lock (to remove one; `F_GETLK`'s answer when nothing conflicts).
pub const F_UNLCK: i16 = 2;

/// `flock` operation: a shared lock.
pub const LOCK_SH: i32 = 1;
/// `flock` operation: an exclusive lock.
pub const LOCK_EX: i32 = 2;
/// `flock` flag: do not wait (`EWOULDBLOCK` instead).
pub const LOCK_NB: i32 = 4;
/// `flock` operation: remove the lock.
pub const LOCK_UN: i32 = 8;
/// `flock` flag `LOCK_MAND`: Linux ignores such requests (returns 0) since 5.15.
pub const LOCK_MAND: i32 = 32;

/// `OFFSET_MAX`: the end of a lock that runs to the end of the file.
const OFFSET_MAX: i64 = i64::MAX;

/// `struct flock` (x86_64 layout, 32 bytes: the padding after `l_pid` included), as
/// `fcntl(2)`'s lock commands read and write it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flock {
    /// [`F_RDLCK`], [`F_WRLCK`] or [`F_UNLCK`].
    pub l_type: i16,
    /// Where `l_start` counts from: `SEEK_SET`, `SEEK_CUR` (the file offset) or `SEEK_END`
    /// (the file size).
    pub l_whence: i16,
    /// First byte of the range, relative to `l_whence`.
    pub l_start: i64,
    /// Length in bytes: 0 = to the end of the file (and beyond); negative = the `-l_len`
    /// bytes before `l_start`.
    pub l_len: i64,
    /// `F_GETLK`: the process holding the conflicting lock (-1 for an OFD lock); must be 0
    /// for the `F_OFD_*` commands.
    pub l_pid: i32,
}

#[cfg(not(uvfs_loom))]
crate::const_assert!(std::mem::size_of::<Flock>() == 32);

/// A `fcntl(2)` lock command (the `struct flock` is [`Task::fcntl_lock`]'s argument).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LockCmd {
    /// `F_GETLK` (5): the first lock that would conflict, for the caller's process.
    GetLk,
    /// `F_SETLK` (6): take or remove a lock of the caller's process; `EAGAIN` on conflict.
    SetLk,
    /// `F_SETLKW` (7): as `SetLk`, waiting for a conflicting lock to go.
    SetLkW,
    /// `F_OFD_GETLK` (36): as `GetLk`, for the open file description.
    OfdGetLk,
    /// `F_OFD_SETLK` (37): as `SetLk`, the lock owned by the open file description.
    OfdSetLk,
    /// `F_OFD_SETLKW` (38): as `SetLkW`, the lock owned by the open file description.
    OfdSetLkW,
}

impl LockCmd {
    /// The command for its `fcntl` number (`F_GETLK` = 5 ..., `F_OFD_GETLK` = 36 ...).
    pub fn from_raw(cmd: i32) -> Option<LockCmd> {
        Some(match cmd {
            5 => LockCmd::GetLk,
            6 => LockCmd::SetLk,
            7 => LockCmd::SetLkW,
            36 => LockCmd::OfdGetLk,
            37 => LockCmd::OfdSetLk,
            38 => LockCmd::OfdSetLkW,
            _ => return None,
        })
    }

    /// The `fcntl` number.
    pub fn raw(self) -> i32 {
        match self {
            LockCmd::GetLk => 5,
            LockCmd::SetLk => 6,
            LockCmd::SetLkW => 7,
            LockCmd::OfdGetLk => 36,
            LockCmd::OfdSetLk => 37,
            LockCmd::OfdSetLkW => 38,
        }
    }

    fn ofd(self) -> bool {
        matches!(
            self,
            LockCmd::OfdGetLk | LockCmd::OfdSetLk | LockCmd::OfdSetLkW
        )
    }
}

/// Who owns a POSIX lock (Linux `fl_owner`): a descriptor table (classic locks) or an open
/// file (OFD locks), by address. An owner's locks are removed before its object is freed
/// (the table's drop, the file's last close), so an address is never reused by a live
/// owner's successor while locks of the old one remain.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// A descriptor table (`current->files`).
    Files(usize),
    /// An open file (`F_OFD_*`).
    File(usize),
}

/// One POSIX record lock: `[start, end]` (inclusive; `end == OFFSET_MAX` to the end).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct PosixLock {
    owner: Owner,
    /// The locking process (`fl_pid`), reported by `F_GETLK` for a classic lock.
    pid: i32,
    /// `F_RDLCK` or `F_WRLCK` (`F_UNLCK` only in a request).
    ty: i16,
    start: i64,
    end: i64,
}

impl PosixLock {
    fn overlaps(&self, o: &PosixLock) -> bool {
        self.start <= o.end && o.start <= self.end
    }

    /// `posix_locks_conflict`: another owner's overlapping lock, one of them a write lock.
    fn conflicts(&self, o: &PosixLock) -> bool {
        self.owner != o.owner && self.overlaps(o) && (self.ty == F_WRLCK || o.ty == F_WRLCK)
    }
}

/// One `flock` lock: its open file (by address) and type.
#[derive(Copy, Clone, Debug)]
struct FlockLock {
    file: usize,
    ty: i16,
}

/// An inode's locks. Protected by `FileLockContext::state`.
#[derive(Default, Debug)]
struct Locks {
    /// POSIX records of every owner (`flc_posix`); an owner's own records never overlap
    /// and same-type ones never touch (they are merged). Sorted by start.
    posix: Vec<PosixLock>,
    /// `flock` locks (`flc_flock`), one per open file at most.
    flock: Vec<FlockLock>,
    /// Whether `BLOCKED` may hold entries of this context's sleeping requests: set by
    /// `BlockedEntry::wait_for`, cleared by `unblock` (a stale `true` costs one lock of
    /// `BLOCKED`), so that a change with no classic sleeper takes no global lock.
    blocked: bool,
}

/// An inode's file locks (Linux `struct file_lock_context`), allocated at its first lock
/// request and freed with the inode.
#[derive(Debug, Default)]
pub struct FileLockContext {
    /// The locks (`flc_lock`). A leaf but for `BLOCKED` (module doc).
    state: wait::Mutex<Locks>,
    /// Waiters of `F_SETLKW` and blocking `flock` sleep here (`fl_wait`); signalled after
    /// every change that removes or weakens a lock, and by an interrupter.
    waiters: wait::Condvar,
    /// Whether `state` holds any lock (Linux's `list_empty_careful` on `flc_posix` and
    /// `flc_flock`): written under `state`'s lock after every change, read without it by
    /// the close paths (`remove_posix`, `remove_file`), so that closing a file of an inode
    /// that had locks once but holds none takes no lock.
    any: plain::AtomicBool,
}

/// Who waits for whom, for deadlock detection: one [`Blocked`] per classic request
/// sleeping in `F_SETLKW`. Linux's `blocked_hash` under `blocked_lock_lock`: global, and
/// taken only by a request that is about to sleep or stops sleeping, and by a change of a
/// context that has sleepers (`FileLockContext::unblock`), never on the open/close/read/
/// write paths. One entry per sleeping request: threads of one process may sleep at once.
///
/// An entry lives from its request's decision to sleep until the next change of its
/// context that wakes the waiters (Linux: `locks_wake_up_blocks` -> `__locks_delete_block`
/// at the unlock, not when the waiter runs again); a woken request that must sleep again
/// records itself anew, checking for a deadlock again.
static BLOCKED: wait::Mutex<Vec<Blocked>> = wait::Mutex::new(Vec::new());

/// An entry of `BLOCKED`.
#[derive(Copy, Clone, Debug)]
struct Blocked {
    /// The sleeping request's owner (a descriptor table's address).
    waiter: usize,
    /// The owner of the lock it waits for.
    blocker: Owner,
    /// The sleeping request's own token (`BlockedEntry::token`).
    token: usize,
    /// The context it sleeps in, by address: its entries go at that context's next change.
    ctx: usize,
}

/// `MAX_DEADLK_ITERATIONS`: how long a chain of waiters the detector follows.
const MAX_DEADLK_ITERATIONS: usize = 10;

/// `posix_locks_deadlock`: whether `me` waiting for `blocker` closes a cycle of classic
/// owners waiting for each other (`what_owner_is_waiting_for`: the first sleeping request
/// of an owner tells what it waits for). Context: caller holds `BLOCKED` (`blocked`).
fn deadlock(blocked: &[Blocked], me: usize, blocker: Owner) -> bool {
    let mut cur = blocker;
    for _ in 0..=MAX_DEADLK_ITERATIONS {
        let Owner::Files(o) = cur else {
            // An OFD owner is not a process waiting for anything (Linux keeps OFD waiters
            // out of `blocked_hash`).
            return false;
        };
        if o == me {
            return true;
        }
        match blocked.iter().find(|b| b.waiter == o) {
            Some(b) => cur = b.blocker,
            None => return false,
        }
    }
    false
}

/// A sleeping classic request's entry in `BLOCKED`, forgotten when its sleep ends, however
/// it ends. Its token is its own address (stable: it is never moved while it has an
/// entry, being borrowed for `wait_for` only in place).
struct BlockedEntry(bool);

impl BlockedEntry {
    fn token(&self) -> usize {
        self as *const BlockedEntry as usize
    }

    /// Records that `me` waits for `blocker` in context `ctx` (replacing this request's
    /// earlier record, if `unblock` left it), unless that would deadlock. Context: `g` is
    /// `ctx`'s `state` guard (taken before `BLOCKED`).
    ///
    /// # Errors
    /// `EDEADLK` if `blocker` (transitively) waits for `me`.
    fn wait_for(
        &mut self,
        ctx: &FileLockContext,
        g: &mut Locks,
        me: usize,
        blocker: Owner,
    ) -> Result<()> {
        let token = self.token();
        let mut b = wait::lock(&BLOCKED);
        if deadlock(&b, me, blocker) {
            return Err(Errno::EDEADLK);
        }
        match b.iter_mut().find(|e| e.token == token) {
            Some(e) => e.blocker = blocker,
            None => b.push(Blocked {
                waiter: me,
                blocker,
                token,
                ctx: ctx.id(),
            }),
        }
        g.blocked = true;
        self.0 = true;
        Ok(())
    }
}

impl Drop for BlockedEntry {
    fn drop(&mut self) {
        if self.0 {
            let token = self.token();
            wait::lock(&BLOCKED).retain(|e| e.token != token);
        }
    }
}

impl FileLockContext {
    /// This context's address: its sleepers' key in `BLOCKED`.
    fn id(&self) -> usize {
        self as *const FileLockContext as usize
    }

    /// `locks_wake_up_blocks` -> `__locks_delete_block`: forgets in `BLOCKED` every request
    /// sleeping in this context, before a change wakes them (each records itself again if
    /// it must sleep again). Otherwise a waiter's entry outlives the lock it waited for
    /// until its thread runs, and a request in that window sees a cycle Linux does not
    /// (false `EDEADLK`). Context: `g` is this context's `state` guard (taken before
    /// `BLOCKED`).
    fn unblock(&self, g: &mut Locks) {
        if !g.blocked {
            return;
        }
        let id = self.id();
        wait::lock(&BLOCKED).retain(|e| e.ctx != id);
        g.blocked = false;
    }

    /// Wakes every waiter (after a change that may grant one; an interrupt).
    pub(crate) fn wake_all(&self) {
        // Taken so that a waiter between its check and its sleep is not missed: it holds
        // `state` from its check until `wait` releases it.
        drop(wait::lock(&self.state));
        self.waiters.notify_all();
    }

    /// One round of a sleeping request: the first publishes the wait in the thread's
    /// interrupter slot (`intr`), with `state` released meanwhile (the slot's lock comes
    /// first in the lock order); the next ones sleep until woken. Either way the caller
    /// checks its request again with the returned guard. `EINTR` if the interrupter fired
    /// (tested under `state` before sleeping, so an interrupt is never lost:
    /// interrupt.rs).
    fn wait_round<'a>(
        &'a self,
        g: wait::MutexGuard<'a, Locks>,
        intr: &mut Option<LockWait>,
    ) -> Result<wait::MutexGuard<'a, Locks>> {
        let Some(w) = intr else {
            drop(g);
            *intr = Some(LockWait::publish(self));
            return Ok(wait::lock(&self.state));
        };
        if w.interrupted() {
            return Err(Errno::EINTR);
        }
        Ok(self
            .waiters
            .wait(g)
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Publishes whether `g` holds any lock (see `any`). Context: `g` is `state`'s guard.
    fn publish(&self, g: &Locks) {
        // Relaxed: written under `state`'s lock; a reader that must see a lock its own
        // owner took sees this store or a later one (the take happened before the owner's
        // close), and a later `false` means that lock was gone by then.
        self.any.store(
            !g.posix.is_empty() || !g.flock.is_empty(),
            plain::Ordering::Relaxed,
        );
    }

    /// Whether some lock may be held (see `any`): `false` lets a close skip the lock.
    fn holds_any(&self) -> bool {
        // Relaxed: see `publish`.
        self.any.load(plain::Ordering::Relaxed)
    }

    /// `posix_test_lock`: the first lock of another owner that conflicts with `req`; for
    /// an `F_UNLCK` request (`F_OFD_GETLK` only), the first of `req.owner`'s own locks
    /// that overlaps it (`posix_test_locks_conflict`, Linux 6.6+).
    fn test_posix(&self, req: &PosixLock) -> Option<PosixLock> {
        let g = wait::lock(&self.state);
        if req.ty == F_UNLCK {
            return g
                .posix
                .iter()
                .find(|l| l.owner == req.owner && req.overlaps(l))
                .copied();
        }
        g.posix.iter().find(|l| req.conflicts(l)).copied()
    }

    /// `posix_lock_inode`: takes, changes or (`F_UNLCK`) removes `req.owner`'s locks over
    /// `req`'s range, merging with its adjacent or overlapping same-type locks and splitting
    /// the others. With `wait`, sleeps while another owner's lock conflicts.
    ///
    /// # Errors
    /// `EAGAIN` (conflict, no `wait`), `EDEADLK` (a classic owner's wait would close a
    /// cycle), `EINTR` (interrupted while sleeping).
    fn posix_lock(&self, req: PosixLock, wait: bool) -> Result<()> {
        let mut blocked = BlockedEntry(false);
        let mut intr = None;
        let mut g = wait::lock(&self.state);
        loop {
            if req.ty != F_UNLCK {
                if let Some(c) = g.posix.iter().find(|l| req.conflicts(l)) {
                    if !wait {
                        return Err(Errno::EAGAIN);
                    }
                    if let Owner::Files(me) = req.owner {
                        let c = c.owner;
                        blocked.wait_for(self, &mut g, me, c)?;
                    }
                    g = self.wait_round(g, &mut intr)?;
                    continue;
                }
            }
            if apply_posix(&mut g.posix, req) {
                self.unblock(&mut g);
                self.publish(&g);
                drop(g);
                self.waiters.notify_all();
            }
            return Ok(());
        }
    }

    /// `flock_lock_inode`: gives open file `file` a lock of type `ty` (`F_UNLCK`: removes
    /// its lock). A lock of the other type is removed first (so a conversion that must
    /// wait, or fails, leaves the file unlocked, as Linux's). With `wait`, sleeps while
    /// another file's lock conflicts.
    ///
    /// # Errors
    /// `EWOULDBLOCK` (conflict, no `wait`), `EINTR` (interrupted while sleeping).
    fn flock_lock(&self, file: usize, ty: i16, wait: bool) -> Result<()> {
        let mut intr = None;
        let mut g = wait::lock(&self.state);
        loop {
            if let Some(i) = g.flock.iter().position(|l| l.file == file) {
                if g.flock[i].ty == ty {
                    return Ok(());
                }
                g.flock.remove(i);
                self.publish(&g);
                self.waiters.notify_all();
            }
            if ty == F_UNLCK {
                return Ok(());
            }
            let conflict = g
                .flock
                .iter()
                .any(|l| l.file != file && (l.ty == F_WRLCK || ty == F_WRLCK));
            if !conflict {
                g.flock.push(FlockLock { file, ty });
                self.publish(&g);
                return Ok(());
            }
            if !wait {
                return Err(Errno::EWOULDBLOCK);
            }
            g = self.wait_round(g, &mut intr)?;
        }
    }

    /// `locks_remove_posix`: drops every classic lock of table `files` (at a close of any
    /// descriptor of the inode by that table, and when the table goes).
    pub(crate) fn remove_posix(&self, files: usize) {
        if !self.holds_any() {
            return;
        }
        let mut g = wait::lock(&self.state);
        let before = g.posix.len();
        g.posix.retain(|l| l.owner != Owner::Files(files));
        if g.posix.len() != before {
            self.unblock(&mut g);
            self.publish(&g);
            drop(g);
            self.waiters.notify_all();
        }
    }

    /// `locks_remove_file`: drops the OFD locks and the `flock` lock of open file `file` (at
    /// its last close).
    pub(crate) fn remove_file(&self, file: usize) {
        if !self.holds_any() {
            return;
        }
        let mut g = wait::lock(&self.state);
        let before = g.posix.len() + g.flock.len();
        g.posix.retain(|l| l.owner != Owner::File(file));
        g.flock.retain(|l| l.file != file);
        if g.posix.len() + g.flock.len() != before {
            self.unblock(&mut g);
            self.publish(&g);
            drop(g);
            self.waiters.notify_all();
        }
    }
}

/// The change of `posix_lock_inode` once no conflict is left: `req.owner`'s locks over
/// `req`'s range become `req` (none for `F_UNLCK`). Returns whether anything changed.
fn apply_posix(list: &mut Vec<PosixLock>, req: PosixLock) -> bool {
    let (s, e) = (req.start, req.end);
    let mut new = req;
    let mut changed = false;
    let mut covered = false;
    let mut out = Vec::with_capacity(list.len() + 2);
    for l in list.drain(..) {
        if l.owner != req.owner {
            out.push(l);
            continue;
        }
        if l.ty == req.ty {
            // Same type: merge when overlapping or adjacent (the owner's same-type locks
            // never touch each other, so one pass finds all).
            if l.end.saturating_add(1) >= new.start && l.start <= new.end.saturating_add(1) {
                if l.start <= new.start && l.end >= new.end {
                    // Already covered by this one lock: nothing changes.
                    out.push(l);
                    covered = true;
                    continue;
                }
                new.start = new.start.min(l.start);
                new.end = new.end.max(l.end);
                changed = true;
                continue;
            }
            out.push(l);
            continue;
        }
        if l.end < s || l.start > e {
            out.push(l);
            continue;
        }
        // Another type (or an unlock) over part of `l`: keep what lies outside the range.
        if l.start < s {
            out.push(PosixLock { end: s - 1, ..l });
        }
        if l.end > e {
            out.push(PosixLock { start: e + 1, ..l });
        }
        changed = true;
    }
    if new.ty != F_UNLCK && !covered {
        out.push(new);
        changed = true;
    }
    out.sort_by_key(|l| l.start);
    *list = out;
    changed
}

impl fmt::Display for Flock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{{type {} whence {} start {} len {} pid {}}}",
            self.l_type, self.l_whence, self.l_start, self.l_len, self.l_pid
        )
    }
}

/// `flock_to_posix_lock` (64-bit `flock64_to_posix_lock`): the range `[start, end]` of `fl`
/// for file `f`, and the type checked.
///
/// # Errors
/// `EINVAL` (bad `l_whence`; a range starting before 0; bad `l_type`), `EOVERFLOW` (a start
/// or end past `OFFSET_MAX`), in Linux's order.
fn to_range<V: Variant>(f: &File<V>, fl: &Flock) -> Result<(i64, i64)> {
    let base = match i32::from(fl.l_whence) {
        SEEK_SET => 0,
        SEEK_CUR => *crate::sync::plock(&f.f_pos) as i64,
        SEEK_END => f.inode().size() as i64,
        _ => return Err(Errno::EINVAL),
    };
    if fl.l_start > OFFSET_MAX - base {
        return Err(Errno::EOVERFLOW);
    }
    let mut start = base + fl.l_start;
    if start < 0 {
        return Err(Errno::EINVAL);
    }
    let end;
    if fl.l_len > 0 {
        if fl.l_len - 1 > OFFSET_MAX - start {
            return Err(Errno::EOVERFLOW);
        }
        end = start + (fl.l_len - 1);
    } else if fl.l_len < 0 {
        if start + fl.l_len < 0 {
            return Err(Errno::EINVAL);
        }
        end = start - 1;
        start += fl.l_len;
    } else {
        end = OFFSET_MAX;
    }
    if !matches!(fl.l_type, F_RDLCK | F_WRLCK | F_UNLCK) {
        return Err(Errno::EINVAL);
    }
    Ok((start, end))
}

/// `locks_remove_posix` at a close of a descriptor of `f` by table `files`: one load when
/// the inode never had a lock.
#[inline]
pub(crate) fn remove_posix<V: Variant>(f: &File<V>, files: usize) {
    if let Some(ctx) = f.inode().flctx() {
        ctx.remove_posix(files);
    }
}

impl Inode {
    /// The inode's lock context, if it ever had a lock request (one load).
    #[inline]
    pub(crate) fn flctx(&self) -> Option<&FileLockContext> {
        self.i_flctx.get()
    }

    /// `locks_get_lock_context`: the lock context, made at the first request.
    fn flctx_get_or_init(&self) -> &FileLockContext {
        self.i_flctx.get_or_init(FileLockContext::default)
    }
}

/// The address of open file `f`: the owner of its OFD and `flock` locks.
fn file_id<V: Variant>(f: &File<V>) -> usize {
    f as *const File<V> as usize
}

impl<V: Variant> Task<V> {
    /// This task's classic POSIX lock owner: its descriptor table (`current->files`).
    fn lock_owner(&self) -> usize {
        self.files.lock_owner()
    }

    /// The request of `fl` over `[start, end]` for `cmd`: owned by the open file `f`
    /// (`F_OFD_*`) or by this task's process.
    ///
    /// # Errors
    /// `EINVAL`: an `F_OFD_*` command with `l_pid` other than 0.
    fn posix_request(
        &self,
        f: &File<V>,
        cmd: LockCmd,
        fl: &Flock,
        (start, end): (i64, i64),
    ) -> Result<PosixLock> {
        let owner = if cmd.ofd() {
            if fl.l_pid != 0 {
                return Err(Errno::EINVAL);
            }
            Owner::File(file_id(f))
        } else {
            Owner::Files(self.lock_owner())
        };
        Ok(PosixLock {
            owner,
            pid: self.getpid(),
            ty: fl.l_type,
            start,
            end,
        })
    }

    /// `fcntl(fd, cmd, fl)` for the record-lock commands. `GetLk`/`OfdGetLk` fill `fl` with
    /// the first lock that would conflict with it (`l_whence` `SEEK_SET`, `l_len` 0 for a
    /// lock to the end, `l_pid` its process or -1 for an OFD lock), or set only `l_type` to
    /// [`F_UNLCK`] when none does. The `Set` commands take, change or remove (`F_UNLCK`) the
    /// lock over `fl`'s range: classic locks belong to this task's process (its descriptor
    /// table; threads share them, a `fork` child does not inherit them; all of them on the
    /// inode go at the close of any of its descriptors of the inode by the process), OFD
    /// locks to the open file (they go at its last close). Overlapping and adjacent locks of
    /// one owner and type merge; a lock of another type over part of one splits it. Locks
    /// conflict across owners when they overlap and one is a write lock.
    ///
    /// `SetLkW`/`OfdSetLkW` sleep until the conflicting locks are gone; another thread
    /// stops the sleep with `EINTR` through this thread's [`Interrupter`](crate::Interrupter)
    /// (the stand-in for a signal; an interrupt that comes while the thread does not
    /// sleep in a lock wait or FUSE request waits for its next one).
    ///
    /// # Errors
    /// `EBADF` (`fd` not open, or `O_PATH`; a `Set` of `F_RDLCK` without read access or of
    /// `F_WRLCK` without write access; `fd` closed by another thread while a classic lock
    /// was being set, which is then removed), `EINVAL` (`l_type` not a lock type, or
    /// `F_UNLCK` for a `GetLk` (an `OfdGetLk` takes it: the open file's own lock over the range, Linux 6.6+); `l_whence` not `SEEK_SET`/`SEEK_CUR`/`SEEK_END`; a range
    /// that starts before 0; `l_pid` not 0 for an `Ofd` command), `EOVERFLOW` (a range end
    /// past `i64::MAX`), `EAGAIN` (`SetLk`/`OfdSetLk`: a conflicting lock), `EDEADLK`
    /// (`SetLkW`: the owner of the conflicting lock waits, directly or through others, for
    /// a lock of this process), `EINTR` (interrupted while sleeping).
    ///
    /// # References
    /// fcntl(2) "Advisory record locking", "Open file description locks"; Linux
    /// `fcntl_getlk`, `fcntl_setlk`, `posix_lock_inode`, `posix_locks_deadlock`.
    pub fn fcntl_lock(&self, fd: Fd, cmd: LockCmd, fl: &mut Flock) -> Result<()> {
        let blocking = matches!(cmd, LockCmd::SetLkW | LockCmd::OfdSetLkW);
        // A sleeping request holds a counted reference (not a borrow of the table).
        let owned;
        let borrowed;
        let f: &File<V> = if blocking {
            owned = self.files.fget(fd.0)?;
            &owned
        } else {
            borrowed = self.fdget_raw(fd)?;
            &borrowed
        };
        // `do_fcntl` on an `O_PATH` file allows only the descriptor commands.
        if f.mode().contains(FMode::PATH) {
            return Err(Errno::EBADF);
        }
        match cmd {
            LockCmd::GetLk | LockCmd::OfdGetLk => {
                // `F_UNLCK` asks `F_OFD_GETLK` for the descriptor's own lock over the range
                // (Linux 6.6+ `fcntl_getlk`); `F_GETLK` refuses it.
                let unlck_ok = cmd == LockCmd::OfdGetLk && fl.l_type == F_UNLCK;
                if fl.l_type != F_RDLCK && fl.l_type != F_WRLCK && !unlck_ok {
                    return Err(Errno::EINVAL);
                }
                let range = to_range(f, fl)?;
                let req = self.posix_request(f, cmd, fl, range)?;
                match f.inode().flctx().and_then(|c| c.test_posix(&req)) {
                    None => fl.l_type = F_UNLCK,
                    Some(c) => {
                        *fl = Flock {
                            l_type: c.ty,
                            l_whence: SEEK_SET as i16,
                            l_start: c.start,
                            l_len: if c.end == OFFSET_MAX {
                                0
                            } else {
                                c.end - c.start + 1
                            },
                            l_pid: match c.owner {
                                Owner::Files(_) => c.pid,
                                Owner::File(_) => -1,
                            },
                        }
                    }
                }
                Ok(())
            }
            LockCmd::SetLk | LockCmd::SetLkW | LockCmd::OfdSetLk | LockCmd::OfdSetLkW => {
                let (start, end) = to_range(f, fl)?;
                // check_fmode_for_setlk.
                let need = match fl.l_type {
                    F_RDLCK => FMode::READ,
                    F_WRLCK => FMode::WRITE,
                    _ => FMode::empty(),
                };
                if !f.mode().contains(need) {
                    return Err(Errno::EBADF);
                }
                let req = self.posix_request(f, cmd, fl, (start, end))?;
                let inode = f.inode();
                if req.ty == F_UNLCK && inode.flctx().is_none() {
                    // Nothing to remove: no context made for it.
                    return Ok(());
                }
                let ctx = inode.flctx_get_or_init();
                ctx.posix_lock(req, blocking)?;
                if req.ty != F_UNLCK && !cmd.ofd() {
                    // The close race of `fcntl_setlk`: a close of `fd` by another thread
                    // of the process while we set the lock removed the process's locks
                    // before ours was in: if `fd` no longer names the file, remove them
                    // again (as the close would have). Under the table's `file_lock`, as
                    // Linux's, so that the close cannot miss our lock while we miss its
                    // close (`FilesRef::names`).
                    if !self.fd_table().names(fd.0, f) {
                        ctx.remove_posix(self.lock_owner());
                        return Err(Errno::EBADF);
                    }
                }
                Ok(())
            }
        }
    }

    /// Removes, on open file `f`, the lock a `Set` command `cmd` over `fl`'s range took
    /// (this task's process's for a classic command, `f`'s own for an `Ofd` one; `fl`'s
    /// `l_type` is ignored), or with `fl` `None` `f`'s `flock` lock: as `F_UNLCK` or
    /// `LOCK_UN` through a descriptor of `f`, without a descriptor. For a caller that must
    /// take back a lock granted to a call that is gone (`uvfs run`), on the file that call
    /// named, where a descriptor number may name another file by then. A `SEEK_CUR` or
    /// `SEEK_END` range is resolved against `f`'s position and size now.
    ///
    /// # Errors
    /// As the `F_UNLCK` form of [`fcntl_lock`](Self::fcntl_lock) (`EINVAL`, `EOVERFLOW`).
    pub fn unlock_file(
        &self,
        f: &crate::OpenFile<V>,
        cmd: LockCmd,
        fl: Option<&Flock>,
    ) -> Result<()> {
        let f: &File<V> = f.file();
        let Some(ctx) = f.inode().flctx() else {
            return Ok(());
        };
        let Some(fl) = fl else {
            return ctx.flock_lock(file_id(f), F_UNLCK, false);
        };
        let fl = Flock {
            l_type: F_UNLCK,
            ..*fl
        };
        let range = to_range(f, &fl)?;
        let req = self.posix_request(f, cmd, &fl, range)?;
        ctx.posix_lock(req, false)
    }

    /// `flock(2)`: `LOCK_SH`, `LOCK_EX` (either may have `LOCK_NB`) or `LOCK_UN` on the open
    /// file of `fd`. The lock belongs to the open file: descriptors `dup`'d from it or
    /// inherited by `fork` share it (a second `flock` through them converts it), other
    /// opens of the same file conflict with it; it goes at `LOCK_UN` or at the file's last
    /// close. A conversion removes the old lock first (not atomic, as Linux's). Without
    /// `LOCK_NB`, waits until the conflicting locks are gone; another thread stops the wait
    /// with `EINTR` through this thread's [`Interrupter`](crate::Interrupter). `flock`
    /// locks and POSIX record locks do not see each other. `LOCK_MAND` requests do nothing
    /// and succeed (Linux since 5.15).
    ///
    /// # Errors
    /// `EINVAL` (`op` other than one of `LOCK_SH`, `LOCK_EX`, `LOCK_UN` with or without
    /// `LOCK_NB`; checked before `fd`), `EBADF` (`fd` not open, or `O_PATH`),
    /// `EWOULDBLOCK` (`LOCK_NB` and a conflicting lock), `EINTR` (interrupted while
    /// waiting).
    ///
    /// # References
    /// flock(2); Linux `SYSCALL_DEFINE2(flock)`, `flock_lock_inode`.
    pub fn flock(&self, fd: Fd, op: i32) -> Result<()> {
        if op & LOCK_MAND != 0 {
            return Ok(());
        }
        let ty = match op & !LOCK_NB {
            LOCK_SH => F_RDLCK,
            LOCK_EX => F_WRLCK,
            LOCK_UN => F_UNLCK,
            _ => return Err(Errno::EINVAL),
        };
        let wait = op & LOCK_NB == 0 && ty != F_UNLCK;
        let owned;
        let borrowed;
        let f: &File<V> = if wait {
            owned = self.files.fget(fd.0)?;
            if owned.mode().contains(FMode::PATH) {
                return Err(Errno::EBADF);
            }
            &owned
        } else {
            borrowed = self.fdget(fd)?;
            &borrowed
        };
        if ty != F_UNLCK && !f.mode().intersects(FMode::READ | FMode::WRITE) {
            return Err(Errno::EBADF);
        }
        let inode = f.inode();
        if ty == F_UNLCK && inode.flctx().is_none() {
            return Ok(());
        }
        inode.flctx_get_or_init().flock_lock(file_id(f), ty, wait)
    }
}

#[cfg(all(test, not(uvfs_loom)))]
mod tests {
    use super::*;

    fn lk(owner: usize, ty: i16, start: i64, end: i64) -> PosixLock {
        PosixLock {
            owner: Owner::Files(owner),
            pid: owner as i32,
            ty,
            start,
            end,
        }
    }

    fn ranges(l: &[PosixLock]) -> Vec<(i16, i64, i64)> {
        l.iter().map(|l| (l.ty, l.start, l.end)).collect()
    }

    #[test]
    fn apply_merges_splits_and_unlocks() {
        let mut l = Vec::new();
        assert!(apply_posix(&mut l, lk(1, F_WRLCK, 10, 19)));
        // Adjacent, same type: merged.
        assert!(apply_posix(&mut l, lk(1, F_WRLCK, 20, 29)));
        assert_eq!(ranges(&l), [(F_WRLCK, 10, 29)]);
        // Covered: no change.
        assert!(!apply_posix(&mut l, lk(1, F_WRLCK, 12, 14)));
        // Another type in the middle: split in three.
        assert!(apply_posix(&mut l, lk(1, F_RDLCK, 15, 19)));
        assert_eq!(
            ranges(&l),
            [(F_WRLCK, 10, 14), (F_RDLCK, 15, 19), (F_WRLCK, 20, 29)]
        );
        // Unlock across two: trimmed.
        assert!(apply_posix(&mut l, lk(1, F_UNLCK, 13, 21)));
        assert_eq!(ranges(&l), [(F_WRLCK, 10, 12), (F_WRLCK, 22, 29)]);
        // Another owner's locks are left alone.
        assert!(apply_posix(&mut l, lk(2, F_RDLCK, 0, OFFSET_MAX)));
        assert!(apply_posix(&mut l, lk(1, F_UNLCK, 0, OFFSET_MAX)));
        assert_eq!(ranges(&l), [(F_RDLCK, 0, OFFSET_MAX)]);
        assert!(!apply_posix(&mut l, lk(1, F_UNLCK, 0, OFFSET_MAX)));
    }

    #[test]
    fn deadlock_follows_chains() {
        let e = |waiter, b, token| Blocked {
            waiter,
            blocker: Owner::Files(b),
            token,
            ctx: 0,
        };
        let b = vec![e(2, 3, 10), e(3, 1, 11)];
        assert!(deadlock(&b, 1, Owner::Files(2)));
        assert!(!deadlock(&b, 4, Owner::Files(2)));
        assert!(!deadlock(&b, 1, Owner::File(2)));
    }
}
