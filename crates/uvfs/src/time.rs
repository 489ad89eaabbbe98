//! The file system clock: multigrain timestamps (coarse per syscall, fine-grained once a
//! ctime was queried) and the floor that keeps them ordered across files.
//!
//! Linux analogue: kernel/time/timekeeping.c (`ktime_get_coarse_real_ts64_mg`,
//! `ktime_get_real_ts64_mg`), fs/inode.c (`inode_set_ctime_current`),
//! Documentation/filesystems/multigrain-ts.rst. How an inode uses these is in inode.rs
//! ("Timestamps").
//!
//! The one shared state is `MG_FLOOR`, a read-mostly word on its own cache line, written
//! only by a fine-grained stamp.

use crate::sync::padded::CacheLine;
use crate::sync::plain::{AtomicU64, Ordering};
use crate::types::Timespec;

pub(crate) const NSEC_PER_SEC: u64 = 1_000_000_000;

/// How far a time may trail the current ctime (or the floor) and still be taken for the
/// same moment seen through a coarser clock; a larger gap means the realtime clock was
/// stepped back. Linux keeps its floor in monotonic time so that a step moves it along; a
/// process cannot read the realtime-minus-monotonic offset atomically, so uvfs bounds the
/// lead instead: the coarse clock trails the fine one by at most a tick (at most 10 ms), and
/// after a step back of less than this, times stay at the floor until the clock catches up.
const MAX_LEAD_NS: u64 = NSEC_PER_SEC;

/// Linux `mg_floor`: the latest fine-grained timestamp handed out, in nanoseconds since the
/// epoch. Atomic; read by every [`coarse_now`], written (compare-and-swap) only by
/// `fine_now`, that is only by a change to a queried inode, so it stays a read-mostly line;
/// on a line of its own so that no hot static shares it.
static MG_FLOOR: CacheLine<AtomicU64> = CacheLine(AtomicU64::new(0));

pub(crate) fn clock(id: rustix::time::ClockId) -> Timespec {
    let t = rustix::time::clock_gettime(id);
    Timespec::new(t.tv_sec, t.tv_nsec as i64)
}

/// Nanoseconds since the epoch (times before 1970 count as the epoch; the clock's values
/// and the times of the inode being stamped, which a FUSE server may set to anything, go
/// through here: saturating).
pub(crate) fn ts_to_ns(t: Timespec) -> u64 {
    if t.tv_sec < 0 {
        0
    } else {
        // Saturating: a file system's times (a FUSE server's attributes) can be anything;
        // past u64's range (year 2554) they all compare as the same late time.
        (t.tv_sec as u64)
            .saturating_mul(NSEC_PER_SEC)
            .saturating_add(t.tv_nsec as u64)
    }
}

pub(crate) fn ns_to_ts(ns: u64) -> Timespec {
    Timespec::new((ns / NSEC_PER_SEC) as i64, (ns % NSEC_PER_SEC) as i64)
}

/// The next nanosecond after `t`.
pub(crate) fn ts_next(t: Timespec) -> Timespec {
    if t.tv_nsec >= NSEC_PER_SEC as i64 - 1 {
        Timespec::new(t.tv_sec + 1, 0)
    } else {
        Timespec::new(t.tv_sec, t.tv_nsec + 1)
    }
}

/// Whether `t`, earlier than `cur`, is so much earlier that the clock must have been
/// stepped back (more than `MAX_LEAD_NS`), rather than read a little before `cur` was.
pub(crate) fn stepped_back(cur: Timespec, t: Timespec) -> bool {
    t < cur && ts_to_ns(cur).saturating_sub(ts_to_ns(t)) >= MAX_LEAD_NS
}

/// The time one syscall stamps changes with: the coarse realtime clock (the last tick), or
/// the floor when a fine-grained stamp in this tick is later (Linux
/// `ktime_get_coarse_real_ts64_mg`). Read once per syscall and passed to every inode it
/// changes; an inode whose ctime was queried turns it into a fine-grained time itself.
#[doc(alias = "ktime_get_coarse_real_ts64_mg")]
pub(crate) fn coarse_now() -> Timespec {
    let c = clock(rustix::time::ClockId::RealtimeCoarse);
    // Relaxed: the floor is one word and publishes nothing else. A syscall that starts after
    // another finished (ordered by whatever told the caller so) sees that one's floor by
    // coherence, which is all the cross-file ordering promise needs.
    let floor = MG_FLOOR.load(Ordering::Relaxed);
    let cn = ts_to_ns(c);
    if floor > cn && floor - cn < MAX_LEAD_NS {
        ns_to_ts(floor)
    } else {
        c
    }
}

/// A fine-grained time that also becomes the floor (Linux `ktime_get_real_ts64_mg`): the
/// realtime clock, or a later floor another thread installed meanwhile (which is later than
/// anything this thread has stamped, as in Linux).
#[doc(alias = "ktime_get_real_ts64_mg")]
pub(crate) fn fine_now() -> Timespec {
    let f = clock(rustix::time::ClockId::Realtime);
    let fns = ts_to_ns(f);
    // Relaxed: as in `coarse_now`; the compare-and-swap below only needs the latest value.
    let mut cur = MG_FLOOR.load(Ordering::Relaxed);
    loop {
        if cur >= fns && cur - fns < MAX_LEAD_NS {
            return ns_to_ts(cur);
        }
        // Relaxed: the floor orders nothing but itself (see `coarse_now`). A floor more than
        // `MAX_LEAD_NS` ahead is a clock stepped back and is replaced.
        match MG_FLOOR.compare_exchange_weak(cur, fns, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return f,
            Err(c) => cur = c,
        }
    }
}

/// The ctime a change stamps (Linux `inode_set_ctime_current`), from the syscall's coarse
/// time `now`, the current ctime `cur`, and whether `cur` was queried; `fine` reads a
/// fine-grained time. Never earlier than `cur` unless the clock was stepped back:
/// - later than `cur`: `now` (a new tick);
/// - queried and not later: a fine-grained time, or the nanosecond after `cur` should the
///   clock not have moved past it, so that the change is visible to whoever saw `cur`;
/// - not queried and not later: `cur` (the same tick, or `now` read just before another
///   change stamped a later time): nothing to write.
pub(crate) fn next_ctime(
    now: Timespec,
    cur: Timespec,
    queried: bool,
    fine: impl FnOnce() -> Timespec,
) -> Timespec {
    let t = if queried && now <= cur { fine() } else { now };
    if t > cur || stepped_back(cur, t) {
        t
    } else if queried {
        ts_next(cur)
    } else {
        cur
    }
}

/// What `Inode::stamp_locked` does to atime or mtime (`ATTR_[AM]TIME`, `ATTR_[AM]TIME_SET`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum TimeUpdate {
    /// Leave it.
    Keep,
    /// The new ctime (`UTIME_NOW`, or a change to contents for mtime).
    Now,
    /// This explicit time.
    Set(Timespec),
}

/// Monotonic nanoseconds (`CLOCK_MONOTONIC`): the clock of cache timeouts (hostfs's
/// `attr_timeout`, a FUSE server's entry and attribute validity).
pub(crate) fn mono_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec as u64)
}
