//! `FdTable`: a task's file descriptor table, looked up without locks.
//!
//! Linux analogue: `struct files_struct`/`struct fdtable` and fs/file.c (`__fget_files_rcu`,
//! `fdget`, `alloc_fd`, `fd_install`, `do_dup2`, `close_range`, `dup_fd`, `expand_fdtable`).
//!
//! # Design
//! - The slot array (`Fdt`) is published through an epoch-protected pointer. `fget` pins the
//!   epoch, loads the array and the slot, takes a reference with one `fetch_add`
//!   ([`FileRef::get`](crate::sync::file_ref::FileRef::get)), then re-checks both the slot and
//!   the array pointer; if either changed it puts the reference and retries. No lock, no
//!   write to any line but the file's counter.
//! - `fdget` takes no reference when the table is not shared (one task): nobody else can
//!   close the descriptor while the call runs (Linux `__fget_light`).
//! - Writers (allocation, install, close, dup2, growth) hold `file_lock`, which sits on its
//!   own cache line, per table (no global lock). Allocation is "lowest free fd" with the
//!   `next_fd` hint and a two-level bitmap (`full_fds_bits`: one bit per full 64-fd word).
//!   Close-on-exec bits are written only when they change.
//! - Growth copies the slots into a bigger array and publishes it; readers of the old array
//!   see stale slots only until their re-check of the array pointer.
//! - References are per table, not per slot (a sloppy counter, after Boyd-Wickizer et al.,
//!   OSDI 2010, and Refcache): a table that names a file in any number of slots holds ONE
//!   reference on its `FileRef`, and counts its slots per file privately, under `file_lock`.
//!   `dup`, `F_DUPFD`, `dup2` and `close` of a file the table keeps naming write only the
//!   table's own lines, so `close(dup(0))` in forked tasks sharing one `File` (UnixBench's
//!   syscall loop) writes no shared cache line; Linux bumps `f_count` there. Only the first
//!   slot of a file in a table takes a reference and only the last one drops it.
//!
//! # Races `fget` survives
//! The re-checks make `fget` linearizable with `close`/`dup2` (it never returns a file the
//! descriptor stopped naming before the get); memory safety rests on the epoch pin and on a
//! released count never coming back.
//! 1. `close(fd)` between the slot load and the get: the get fails if the close released the
//!    last reference (dead zone); otherwise the slot re-check sees NULL and puts back.
//! 2. `close(fd)` then `open` reusing the fd (or `dup2` onto it): the re-check sees another
//!    pointer. The old `File`'s memory cannot be reused while we are pinned, so there is no
//!    ABA on the pointer.
//! 3. Growth after our array load, then a close through the new array: the array-pointer
//!    re-check catches it.
//!
//! Lock order: `file_lock` is a leaf (no other uvfs lock is taken while holding it; the
//! puts of replaced or closed files run after it is released).

use crate::file::{File, FileHandle};
use crate::sync::epoch::{self, Guard, Shared};
use crate::sync::padded::CacheLine;
use crate::sync::rcu::RcuRef;
use crate::sync::rcu::RcuRefcounted as _;
use crate::sync::refcount::RefCount;
use crate::sync::{fence, lock, plain, AtomicPtr, Mutex, MutexGuard, Ordering};
use crate::variant::{Uvfs, Variant};
use crate::{Errno, Result};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Deref;
use std::ptr;

/// Initial number of slots (`NR_OPEN_DEFAULT` = `BITS_PER_LONG`).
pub const NR_OPEN_DEFAULT: u32 = 64;
/// Largest table size (`sysctl_nr_open`'s default, 1 << 20).
pub const NR_OPEN: u32 = 1 << 20;
/// Default per-table descriptor limit (`RLIMIT_NOFILE` soft limit on Linux: 1024).
pub const RLIMIT_NOFILE_DEFAULT: u32 = 1024;

/// The published slot array.
struct Fdt<V: Variant> {
    fd: Box<[AtomicPtr<File<V>>]>,
}

impl<V: Variant> Fdt<V> {
    fn with_capacity(n: u32) -> Fdt<V> {
        Fdt {
            fd: (0..n).map(|_| AtomicPtr::new(ptr::null_mut())).collect(),
        }
    }
}

/// Hashes a `File` address (`usize`): they are unique and 64-byte aligned, so a multiply
/// spreads them well; no SipHash on the `dup`/`close` path.
#[derive(Default)]
struct PtrHasher(u64);

impl Hasher for PtrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = ((n as u64) >> 6).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Allocation state. Protected by `FdTable::file_lock`.
struct FdAlloc {
    /// Per file named by a slot of this table: how many slots name it. The table holds one
    /// `FileRef` reference per key (INVARIANT), whatever the count.
    files: HashMap<usize, u32, BuildHasherDefault<PtrHasher>>,
    /// Lowest fd that may be free (`next_fd`).
    next_fd: u32,
    /// One bit per fd: allocated (installed or reserved).
    open_fds: Vec<u64>,
    /// One bit per `open_fds` word: the word is full.
    full_fds_bits: Vec<u64>,
    /// One bit per fd: close on exec.
    close_on_exec: Vec<u64>,
    /// Slots in the published array.
    max_fds: u32,
    /// Descriptor limit (`RLIMIT_NOFILE`): allocations at or above it fail with `EMFILE`.
    rlimit: u32,
}

#[inline]
fn test_bit(map: &[u64], i: u32) -> bool {
    map[(i / 64) as usize] & (1u64 << (i % 64)) != 0
}

/// Index of the first zero bit at or after `start`, or `size` if none below `size`.
fn find_next_zero_bit(map: &[u64], size: u32, start: u32) -> u32 {
    let mut i = start;
    while i < size {
        let w = (i / 64) as usize;
        let word = map[w] | ((1u64 << (i % 64)) - 1);
        if word != u64::MAX {
            return (w as u32 * 64 + (!word).trailing_zeros()).min(size);
        }
        i = (w as u32 + 1) * 64;
    }
    size
}

impl FdAlloc {
    fn new(max_fds: u32) -> FdAlloc {
        let words = (max_fds / 64) as usize;
        FdAlloc {
            files: HashMap::default(),
            next_fd: 0,
            open_fds: vec![0; words],
            full_fds_bits: vec![0; words.div_ceil(64)],
            close_on_exec: vec![0; words],
            max_fds,
            rlimit: RLIMIT_NOFILE_DEFAULT,
        }
    }

    /// One more slot names `p`. Returns `true` when the table did not name `p` yet: the
    /// caller's reference on `p` becomes the table's; otherwise the caller keeps (and must
    /// drop) its own.
    fn slot_get<V: Variant>(&mut self, p: *mut File<V>) -> bool {
        match self.files.entry(p as usize) {
            Entry::Occupied(mut e) => {
                *e.get_mut() += 1;
                false
            }
            Entry::Vacant(v) => {
                v.insert(1);
                true
            }
        }
    }

    /// One slot fewer names `p`. Returns `true` when it was the last one: the caller now owns
    /// the table's reference on `p` and must drop it (after releasing `file_lock`).
    fn slot_put<V: Variant>(&mut self, p: *mut File<V>) -> bool {
        match self.files.entry(p as usize) {
            Entry::Occupied(mut e) => {
                if *e.get() > 1 {
                    *e.get_mut() -= 1;
                    false
                } else {
                    e.remove();
                    true
                }
            }
            Entry::Vacant(_) => {
                debug_assert!(false, "slot_put of a file the table does not name");
                false
            }
        }
    }

    fn is_open(&self, fd: u32) -> bool {
        fd < self.max_fds && test_bit(&self.open_fds, fd)
    }

    fn set_open(&mut self, fd: u32) {
        let w = (fd / 64) as usize;
        self.open_fds[w] |= 1u64 << (fd % 64);
        if self.open_fds[w] == u64::MAX {
            self.full_fds_bits[w / 64] |= 1u64 << (w % 64);
        }
    }

    fn clear_open(&mut self, fd: u32) {
        let w = (fd / 64) as usize;
        self.open_fds[w] &= !(1u64 << (fd % 64));
        self.full_fds_bits[w / 64] &= !(1u64 << (w % 64));
    }

    /// Sets or clears the close-on-exec bit, writing only when it changes.
    fn set_cloexec(&mut self, fd: u32, on: bool) {
        let w = (fd / 64) as usize;
        let bit = 1u64 << (fd % 64);
        if (self.close_on_exec[w] & bit != 0) != on {
            self.close_on_exec[w] ^= bit;
        }
    }

    /// `find_next_fd`: the lowest free fd at or after `start` (`max_fds` if none).
    fn find_next_fd(&self, start: u32) -> u32 {
        let maxbit = self.max_fds / 64;
        let bitbit = find_next_zero_bit(&self.full_fds_bits, maxbit, start / 64) * 64;
        if bitbit >= self.max_fds {
            return self.max_fds;
        }
        find_next_zero_bit(&self.open_fds, self.max_fds, start.max(bitbit))
    }
}

/// A file descriptor table, shared by the threads of a task group (`CLONE_FILES`) and copied
/// by `fork`.
///
/// Shapes: descriptors are `0 .. rlimit` (default 1024, at most 2^20); the slot array grows
/// by powers of two from 64.
///
/// # References
/// Linux fs/file.c; `dup(2)`, `close(2)`, `close_range(2)`, `fcntl(2)` F_DUPFD.
pub struct FdTable<V: Variant = Uvfs> {
    /// The published slot array (Linux `files->fdt`): never null, owned (a `Box`) by the
    /// table; replaced only by `expand_locked` under `file_lock`, the old one retired through
    /// the epoch. A `sync::AtomicPtr` rather than crossbeam's `Atomic` so that under
    /// `--cfg uvfs_loom` its publication is a loom atomic: loom then sees that a new array's
    /// slots are created before `fget` loads them (with crossbeam's `Atomic`, a real atomic
    /// loom cannot see, it reports a causality violation) and models the re-check of race 3.
    fdt: CacheLine<AtomicPtr<Fdt<V>>>,
    file_lock: CacheLine<Mutex<FdAlloc>>,
    /// Set (once, sticky) when a reference to this table left its tasks' hands
    /// (`Task::files`): from then on `fdget` always takes references, because some other
    /// thread may hold the table without holding a `Task` (read on every `fdget`, written
    /// once).
    exposed: plain::AtomicBool,
}

impl<V: Variant> fmt::Debug for FdTable<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = lock(&self.file_lock);
        f.debug_struct("FdTable")
            .field("max_fds", &a.max_fds)
            .field(
                "open",
                &a.open_fds.iter().map(|w| w.count_ones()).sum::<u32>(),
            )
            .finish()
    }
}

/// A file borrowed for one call (`struct fd`): by reference when the table is not shared,
/// else by a counted handle.
#[derive(Debug)]
pub enum FdRef<'a, V: Variant = Uvfs> {
    /// No reference taken: the table has one user, which is the caller.
    Borrowed(&'a File<V>),
    /// A counted reference from `fget`.
    Owned(FileHandle<V>),
}

impl<V: Variant> Deref for FdRef<'_, V> {
    type Target = File<V>;
    #[inline]
    fn deref(&self) -> &File<V> {
        match self {
            FdRef::Borrowed(f) => f,
            FdRef::Owned(h) => h,
        }
    }
}

impl<V: Variant> Default for FdTable<V> {
    fn default() -> Self {
        Self::new_variant()
    }
}

impl FdTable {
    /// An empty table with 64 slots and the default limit of 1024 descriptors.
    pub fn new() -> FdTable {
        FdTable::new_variant()
    }
}

impl<V: Variant> FdTable<V> {
    /// [`new`](FdTable::new) for the variant `V` ([`crate::variant`]).
    pub fn new_variant() -> FdTable<V> {
        FdTable {
            // INVARIANT: the array pointer is never null.
            fdt: CacheLine(AtomicPtr::new(Box::into_raw(Box::new(Fdt::with_capacity(
                NR_OPEN_DEFAULT,
            ))))),
            file_lock: CacheLine(Mutex::new(FdAlloc::new(NR_OPEN_DEFAULT))),
            exposed: plain::AtomicBool::new(false),
        }
    }

    fn alloc_locked(&self) -> MutexGuard<'_, FdAlloc> {
        lock(&self.file_lock)
    }

    /// The published array, for as long as `_guard` lives.
    ///
    /// # Safety
    /// - `_guard` is pinned, or the caller holds `file_lock` for all of `'g` (then the array
    ///   cannot be replaced or retired, and `_guard` may be `epoch::unprotected()`).
    #[inline]
    unsafe fn fdt<'g>(&self, _guard: &'g Guard) -> &'g Fdt<V> {
        // Acquire: pairs with the Release swap in `expand_locked`: the new array's slots
        // (created and copied before the swap) are visible.
        let p = self.fdt.load(Ordering::Acquire);
        // SAFETY: never null (INVARIANT of `new`/`dup_fd`/`expand_locked`); an array is
        // retired only through the epoch after being replaced under `file_lock`, so it
        // outlives `'g` (caller's contract).
        unsafe { &*p }
    }

    /// The published array. Context: the caller holds `file_lock` (`_a` is the state it
    /// guards: only a holder has one) for as long as it uses the result; under the lock the
    /// array can be neither replaced nor retired.
    #[inline]
    fn fdt_locked(&self, _a: &FdAlloc) -> &Fdt<V> {
        debug_assert!(self.file_lock.try_lock().is_err(), "caller holds file_lock");
        // SAFETY: only `expand_locked`, under `file_lock`, replaces and retires the array;
        // the caller holds the lock while it uses the result (Context above).
        unsafe { self.fdt(epoch::unprotected()) }
    }

    /// `fget`: a counted reference to the file at `fd`.
    ///
    /// # Errors
    /// `EBADF` if `fd` is negative, out of range, or not open (or only reserved).
    pub fn fget(&self, fd: i32) -> Result<FileHandle<V>> {
        if fd < 0 {
            return Err(Errno::EBADF);
        }
        let guard = epoch::pin();
        loop {
            // Acquire: pairs with the Release swap in `expand_locked`: the new array's slots
            // (created and copied before the swap) are visible.
            let fdt_p = self.fdt.load(Ordering::Acquire);
            // SAFETY: never null (INVARIANT of `new`/`dup_fd`/`expand_locked`), retired only
            // through the epoch after being replaced, and we are pinned.
            let fdt = unsafe { &*fdt_p };
            let Some(slot) = fdt.fd.get(fd as usize) else {
                return Err(Errno::EBADF);
            };
            // Acquire: pairs with the Release stores in `fd_install`/`install`/`dup2`: the
            // File's fields are initialised.
            let p = slot.load(Ordering::Acquire);
            if p.is_null() {
                return Err(Errno::EBADF);
            }
            // SAFETY: `p` was loaded from a slot holding a reference while `guard` is pinned.
            match unsafe { RcuRef::try_get_raw(p, &guard) } {
                // Race 1: released under us; the slot has changed, reload it.
                None => continue,
                Some(f) => {
                    // Relaxed: the Acquire of the get above orders these loads after it, and
                    // a `close` that dropped the reference we revived stored NULL before its
                    // Release put, which our get read from (races 1-3 in the module doc).
                    if slot.load(Ordering::Relaxed) != p
                        || self.fdt.load(Ordering::Relaxed) != fdt_p
                    {
                        drop(f);
                        continue;
                    }
                    return Ok(f);
                }
            }
        }
    }

    /// `fdget`: the file at `fd` for the duration of one call, without taking a reference
    /// when `shared` is false.
    ///
    /// # Safety
    /// - When `shared` is false, the caller is the only user of this table for the lifetime
    ///   of the result: no other thread can close, replace or grow it meanwhile (the owning
    ///   `Task` is `!Sync` and holds the only `Arc` to the table), and the caller does not
    ///   close `fd` itself while it holds the result.
    ///
    /// # Errors
    /// As [`fget`](Self::fget).
    #[inline]
    pub(crate) unsafe fn fdget(&self, fd: i32, shared: bool) -> Result<FdRef<'_, V>> {
        if shared {
            return self.fget(fd).map(FdRef::Owned);
        }
        if fd < 0 {
            return Err(Errno::EBADF);
        }
        // Acquire fence: the table was shared until the other users dropped their `Arc`s;
        // pairs with the Release decrement of `Arc::drop` so their last writes are visible.
        fence(Ordering::Acquire);
        // SAFETY: no concurrent writer exists (caller's contract), so nothing is retired
        // while we read; `unprotected` only skips pinning.
        let guard = unsafe { epoch::unprotected() };
        // SAFETY: single user: nothing replaces or retires the array meanwhile.
        let fdt = unsafe { self.fdt(guard) };
        let Some(slot) = fdt.fd.get(fd as usize) else {
            return Err(Errno::EBADF);
        };
        // Relaxed: only this thread writes the slots (caller's contract).
        let p = slot.load(Ordering::Relaxed);
        if p.is_null() {
            return Err(Errno::EBADF);
        }
        // SAFETY: the slot holds a reference that only this thread can drop, and the caller
        // does not close `fd` while the borrow lives.
        Ok(FdRef::Borrowed(unsafe { &*p }))
    }

    /// Grows the array to hold `nr` (at least `nr + 1` slots, a power of two).
    ///
    /// # Errors
    /// `EMFILE` if `nr >= NR_OPEN`.
    #[cold]
    fn expand_locked(&self, a: &mut FdAlloc, nr: u32) -> Result<()> {
        if nr >= NR_OPEN {
            return Err(Errno::EMFILE);
        }
        let n = (nr + 1).next_power_of_two().clamp(NR_OPEN_DEFAULT, NR_OPEN);
        if n <= a.max_fds {
            return Ok(());
        }
        let old = self.fdt_locked(a);
        let new = Box::new(Fdt::with_capacity(n));
        for (o, s) in old.fd.iter().zip(new.fd.iter()) {
            // Relaxed: under `file_lock`, the only writer; the Release swap below publishes.
            s.store(o.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        let words = (n / 64) as usize;
        a.open_fds.resize(words, 0);
        a.close_on_exec.resize(words, 0);
        a.full_fds_bits.resize(words.div_ceil(64), 0);
        a.max_fds = n;
        // Release: publishes the new array's slots (created and copied above) to the Acquire
        // loads of the array in `fget` and `fdt`. No Acquire: the old array was published to
        // us by `file_lock`. INVARIANT: the new pointer is not null.
        let old_p = self.fdt.swap(Box::into_raw(new), Ordering::Release);
        let pinned = epoch::pin();
        // SAFETY: `old_p` came from `Box::into_raw` (the layout crossbeam's `Owned` uses), is
        // unreachable from `self.fdt` now and is retired once, by this writer under the lock;
        // its slots do not own references (the new array does), and `Fdt` has no `Drop` that
        // touches files.
        unsafe { pinned.defer_destroy(Shared::from(old_p as *const Fdt<V>)) };
        Ok(())
    }

    /// Stores `file` into slot `fd` of the current array. Context: caller holds `file_lock`.
    fn slot_store_locked(&self, a: &FdAlloc, fd: u32, file: *mut File<V>) -> *mut File<V> {
        let slot = &self.fdt_locked(a).fd[fd as usize];
        // A load and a store, not a swap: under `file_lock` we are the slot's only writer, so
        // the pair cannot lose an update, and on x86 it costs no locked instruction (a swap
        // is an `xchg`, 10-19 ns here; Linux's `fd_install` is a plain `rcu_assign_pointer`).
        // Relaxed load: the old pointer's reference is ours, published to us by the lock.
        let old = slot.load(Ordering::Relaxed);
        // Release: pairs with the Acquire slot load in `fget` (the File's fields are
        // initialised).
        slot.store(file, Ordering::Release);
        old
    }

    /// `alloc_fd`: reserves the lowest free descriptor `>= start`.
    ///
    /// # Errors
    /// `EMFILE` if none is free below the limit.
    pub(crate) fn alloc_fd(&self, start: u32, cloexec: bool) -> Result<u32> {
        let mut a = self.alloc_locked();
        self.alloc_fd_locked(&mut a, start, cloexec)
    }

    fn alloc_fd_locked(&self, a: &mut FdAlloc, start: u32, cloexec: bool) -> Result<u32> {
        let mut fd = start.max(a.next_fd);
        if fd < a.max_fds {
            fd = a.find_next_fd(fd);
        }
        if fd >= a.rlimit {
            return Err(Errno::EMFILE);
        }
        if fd >= a.max_fds {
            self.expand_locked(a, fd)?;
        }
        if start <= a.next_fd {
            a.next_fd = fd + 1;
        }
        a.set_open(fd);
        a.set_cloexec(fd, cloexec);
        Ok(fd)
    }

    /// `put_unused_fd`: gives back a descriptor reserved by `alloc_fd` and never installed.
    pub(crate) fn put_unused_fd(&self, fd: u32) {
        let mut a = self.alloc_locked();
        if a.is_open(fd) {
            a.clear_open(fd);
            a.next_fd = a.next_fd.min(fd);
        }
    }

    /// `fd_install`: publishes `file` at descriptor `fd`, reserved by `alloc_fd`.
    pub(crate) fn fd_install(&self, fd: u32, file: FileHandle<V>) {
        let mut a = self.alloc_locked();
        let extra = Self::adopt_locked(&mut a, file);
        let old = self.slot_store_locked(&a, fd, extra.0);
        debug_assert!(old.is_null(), "fd_install over an installed slot");
        drop(a);
        drop(extra.1);
    }

    /// Counts a new slot for `file`: returns its pointer, and the caller's reference when the
    /// table already holds one (to be dropped after `file_lock` is released).
    fn adopt_locked(a: &mut FdAlloc, file: FileHandle<V>) -> (*mut File<V>, Option<FileHandle<V>>) {
        let p = RcuRef::as_ptr(&file);
        if a.slot_get(p) {
            (RcuRef::into_raw(file), None)
        } else {
            (p, Some(file))
        }
    }

    /// Allocates the lowest descriptor `>= start` and installs `file` there in one step
    /// (`dup`, `F_DUPFD`).
    ///
    /// # Errors
    /// `EMFILE` if none is free below the limit (then `file` is dropped).
    pub fn install(&self, file: FileHandle<V>, start: u32, cloexec: bool) -> Result<u32> {
        let mut a = self.alloc_locked();
        let fd = self.alloc_fd_locked(&mut a, start, cloexec)?;
        let (p, extra) = Self::adopt_locked(&mut a, file);
        self.slot_store_locked(&a, fd, p);
        drop(a);
        drop(extra);
        Ok(fd)
    }

    /// `dup`/`F_DUPFD`: the lowest free descriptor `>= start`, naming the file at `oldfd`.
    /// Takes no reference on the file (the table already holds one): writes only this
    /// table's lines.
    ///
    /// # Errors
    /// `EBADF` if `oldfd` is not open; `EMFILE` if no descriptor is free below the limit.
    pub fn dup_from(&self, oldfd: i32, start: u32, cloexec: bool) -> Result<u32> {
        let mut a = self.alloc_locked();
        let old = u32::try_from(oldfd).map_err(|_| Errno::EBADF)?;
        let p = self.slot_load_locked(&a, old);
        if p.is_null() {
            return Err(Errno::EBADF);
        }
        let fd = self.alloc_fd_locked(&mut a, start, cloexec)?;
        let first = a.slot_get(p);
        debug_assert!(!first, "an installed file is already counted");
        self.slot_store_locked(&a, fd, p);
        Ok(fd)
    }

    /// The file in slot `fd`, NULL if none or out of range. Context: caller holds `file_lock`.
    fn slot_load_locked(&self, a: &FdAlloc, fd: u32) -> *mut File<V> {
        if fd >= a.max_fds {
            return ptr::null_mut();
        }
        let fdt = self.fdt_locked(a);
        // Relaxed: under the lock, the only writer.
        fdt.fd[fd as usize].load(Ordering::Relaxed)
    }

    /// `close(fd)`: removes the descriptor and drops its reference (`file_close_fd` +
    /// `filp_close`), after the file system's `->flush` for a file that has one.
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open; the file system's flush error (the descriptor is
    /// closed all the same, as Linux's).
    pub fn close_fd(&self, fd: i32) -> Result<()> {
        let (file, last) = {
            let mut a = self.alloc_locked();
            let fd = u32::try_from(fd).map_err(|_| Errno::EBADF)?;
            if fd >= a.max_fds {
                return Err(Errno::EBADF);
            }
            let fdt = self.fdt_locked(&a);
            let slot = &fdt.fd[fd as usize];
            // Relaxed: fine to test under the lock (we are the only writer).
            let p = slot.load(Ordering::Relaxed);
            if p.is_null() {
                return Err(Errno::EBADF);
            }
            // A plain store, not a swap (no locked instruction): under the lock we are the
            // only writer, so `p` is still the slot's value. Relaxed: the NULL needs no
            // publication of its own: `fget` readers that revive the reference we drop below
            // are ordered by our Release put (race 1).
            slot.store(ptr::null_mut(), Ordering::Relaxed);
            a.clear_open(fd);
            a.set_cloexec(fd, false);
            a.next_fd = a.next_fd.min(fd);
            if !a.slot_put(p) {
                // Other slots still name the file: the table keeps its reference, which
                // keeps the file alive while we hold the lock.
                // SAFETY: as just said.
                let f = unsafe { &*p };
                if !f.wants_flush() {
                    // No shared write at all.
                    return Ok(());
                }
                // A reference of our own for the flush, which must not run under the lock
                // (a FUSE file system's waits on its server).
                // SAFETY: `p` is the table's reference, not given up: the clone is a new
                // one, and `ManuallyDrop` leaves the table's alone.
                let mine = (*std::mem::ManuallyDrop::new(unsafe { RcuRef::from_raw(p) })).clone();
                (mine, false)
            } else {
                // SAFETY: that was the table's last slot naming the file: its reference is
                // ours.
                (unsafe { RcuRef::from_raw(p) }, true)
            }
        };
        let r = file.flush();
        if last {
            RcuRef::put_close(file);
        } else {
            drop(file);
        }
        r
    }

    /// `do_dup2`: makes `newfd` refer to the file at `oldfd`, closing what `newfd` held.
    /// Returns `newfd`. `oldfd == newfd` is the caller's business (dup2 vs dup3 differ).
    ///
    /// # Errors
    /// `EBADF` if `oldfd` is not open or `newfd` is at or above the limit; `EBUSY` if `newfd`
    /// is reserved by an `open` in progress (Linux returns the same); `EMFILE` if the table
    /// cannot grow that far.
    pub fn dup2(&self, oldfd: i32, newfd: i32, cloexec: bool) -> Result<i32> {
        let tofree = {
            let mut a = self.alloc_locked();
            let new = u32::try_from(newfd).map_err(|_| Errno::EBADF)?;
            if new >= a.rlimit {
                return Err(Errno::EBADF);
            }
            let old = u32::try_from(oldfd).map_err(|_| Errno::EBADF)?;
            if new >= a.max_fds {
                self.expand_locked(&mut a, new)?;
            }
            let file = self.slot_load_locked(&a, old);
            if file.is_null() {
                return Err(Errno::EBADF);
            }
            let cur = self.slot_load_locked(&a, new);
            if cur.is_null() && a.is_open(new) {
                return Err(Errno::EBUSY);
            }
            // `file` is installed: the table already holds its reference.
            a.slot_get(file);
            let prev = self.slot_store_locked(&a, new, file);
            a.set_open(new);
            a.set_cloexec(new, cloexec);
            if !prev.is_null() && a.slot_put(prev) {
                prev
            } else {
                ptr::null_mut()
            }
        };
        if !tofree.is_null() {
            // SAFETY: that was the table's last slot naming it: its reference is ours.
            RcuRef::put_close(unsafe { RcuRef::from_raw(tofree) });
        }
        Ok(newfd)
    }

    /// The close-on-exec flag of `fd` (`F_GETFD`).
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open.
    pub fn get_cloexec(&self, fd: i32) -> Result<bool> {
        let a = self.alloc_locked();
        let fd = u32::try_from(fd).map_err(|_| Errno::EBADF)?;
        if !self.installed_locked(&a, fd) {
            return Err(Errno::EBADF);
        }
        Ok(test_bit(&a.close_on_exec, fd))
    }

    /// Sets the close-on-exec flag of `fd` (`F_SETFD`); writes only when it changes.
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open.
    pub fn set_cloexec(&self, fd: i32, on: bool) -> Result<()> {
        let mut a = self.alloc_locked();
        let fd = u32::try_from(fd).map_err(|_| Errno::EBADF)?;
        if !self.installed_locked(&a, fd) {
            return Err(Errno::EBADF);
        }
        a.set_cloexec(fd, on);
        Ok(())
    }

    fn installed_locked(&self, a: &FdAlloc, fd: u32) -> bool {
        !self.slot_load_locked(a, fd).is_null()
    }

    /// Removes the installed descriptors in `first ..= last` for which `pick(fd, cloexec)`
    /// holds and returns their files. Context: none (takes `file_lock`).
    fn take_range(&self, first: u32, last: u32, pick: impl Fn(bool) -> bool) -> Vec<FileHandle<V>> {
        let mut a = self.alloc_locked();
        let mut out = Vec::new();
        if first >= a.max_fds {
            return out;
        }
        let last = last.min(a.max_fds - 1);
        let fdt = self.fdt_locked(&a);
        let mut fd = first;
        while fd <= last {
            if !test_bit(&a.open_fds, fd) {
                fd = find_next_set(&a.open_fds, a.max_fds, fd + 1);
                continue;
            }
            let slot = &fdt.fd[fd as usize];
            // Relaxed: under the lock.
            let p = slot.load(Ordering::Relaxed);
            if !p.is_null() && pick(test_bit(&a.close_on_exec, fd)) {
                // Relaxed, and a store rather than a swap: as in `close_fd`.
                slot.store(ptr::null_mut(), Ordering::Relaxed);
                a.clear_open(fd);
                a.set_cloexec(fd, false);
                a.next_fd = a.next_fd.min(fd);
                if a.slot_put(p) {
                    // SAFETY: the table's last slot naming it: its reference is ours.
                    out.push(unsafe { RcuRef::from_raw(p) });
                }
            }
            fd += 1;
        }
        out
    }

    /// `close_range(first, last)` without flags: closes every open descriptor in the range.
    pub fn close_range(&self, first: u32, last: u32) {
        for f in self.take_range(first, last, |_| true) {
            RcuRef::put_close(f);
        }
    }

    /// `close_range(.., CLOSE_RANGE_CLOEXEC)`: marks every open descriptor in the range
    /// close-on-exec.
    pub fn set_cloexec_range(&self, first: u32, last: u32) {
        let mut a = self.alloc_locked();
        if first >= a.max_fds {
            return;
        }
        let last = last.min(a.max_fds - 1);
        for fd in first..=last {
            if test_bit(&a.open_fds, fd) {
                a.set_cloexec(fd, true);
            }
        }
    }

    /// `do_close_on_exec`: closes every descriptor marked close-on-exec.
    pub fn close_on_exec(&self) {
        for f in self.take_range(0, u32::MAX, |cloexec| cloexec) {
            RcuRef::put_close(f);
        }
    }

    /// `dup_fd`: a copy of this table for `fork` (or `CLOSE_RANGE_UNSHARE`): the same files,
    /// one more reference each (one per file, not per slot), the same close-on-exec bits and limit. Descriptors reserved
    /// by an `open` in progress are not copied.
    pub fn dup_fd(&self) -> FdTable<V> {
        let a = self.alloc_locked();
        let mut na = FdAlloc::new(a.max_fds);
        na.rlimit = a.rlimit;
        na.close_on_exec.clone_from(&a.close_on_exec);
        na.files.clone_from(&a.files);
        for &p in a.files.keys() {
            // SAFETY: a key of `files` is a file this table holds a reference on: alive.
            unsafe { &*(p as *const File<V>) }.file_ref().inc();
        }
        let new = Box::new(Fdt::with_capacity(a.max_fds));
        let fdt = self.fdt_locked(&a);
        for (fd, (o, s)) in fdt.fd.iter().zip(new.fd.iter()).enumerate() {
            // Relaxed: under the lock.
            let p = o.load(Ordering::Relaxed);
            if !p.is_null() {
                // Relaxed: the new table is not shared yet; moving it to another thread
                // (spawn, channel) publishes it.
                s.store(p, Ordering::Relaxed);
                na.set_open(fd as u32);
            } else {
                na.set_cloexec(fd as u32, false);
            }
        }
        FdTable {
            // INVARIANT: the array pointer is never null.
            fdt: CacheLine(AtomicPtr::new(Box::into_raw(new))),
            file_lock: CacheLine(Mutex::new(na)),
            exposed: plain::AtomicBool::new(false),
        }
    }

    /// Marks the table as reachable outside its tasks (see `exposed`); writes only the
    /// first time.
    pub(crate) fn expose(&self) {
        // Relaxed: read back only by `is_exposed` on the thread that exposed the table (its
        // own program order) or by threads that received the reference afterwards through
        // a synchronising hand-off (spawn, channel, scope).
        if !self.exposed.load(plain::Ordering::Relaxed) {
            // Relaxed: as above.
            self.exposed.store(true, plain::Ordering::Relaxed);
        }
    }

    /// Whether [`expose`](Self::expose) was called.
    #[inline]
    pub(crate) fn is_exposed(&self) -> bool {
        // Relaxed: see `expose`.
        self.exposed.load(plain::Ordering::Relaxed)
    }

    /// The descriptor limit (`RLIMIT_NOFILE`).
    pub fn rlimit(&self) -> u32 {
        self.alloc_locked().rlimit
    }

    /// Sets the descriptor limit. Existing descriptors above it stay open (as Linux).
    ///
    /// # Errors
    /// `EPERM` above `NR_OPEN` (2^20), as `setrlimit` beyond `nr_open`.
    pub fn set_rlimit(&self, n: u32) -> Result<()> {
        if n > NR_OPEN {
            return Err(Errno::EPERM);
        }
        self.alloc_locked().rlimit = n;
        Ok(())
    }

    /// Number of allocated descriptors (installed or reserved); a snapshot.
    pub fn open_count(&self) -> usize {
        let a = self.alloc_locked();
        a.open_fds.iter().map(|w| w.count_ones() as usize).sum()
    }
}

fn find_next_set(map: &[u64], size: u32, start: u32) -> u32 {
    let mut i = start;
    while i < size {
        let w = (i / 64) as usize;
        let word = map[w] & !((1u64 << (i % 64)) - 1);
        if word != 0 {
            return (w as u32 * 64 + word.trailing_zeros()).min(size);
        }
        i = (w as u32 + 1) * 64;
    }
    size
}

impl<V: Variant> Drop for FdTable<V> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no reader can hold this table any more. The array came from
        // `Box::into_raw` (`new`/`dup_fd`/`expand_locked`); the table holds one reference per
        // key of `files` (FdAlloc INVARIANT).
        unsafe {
            // Relaxed: exclusive access.
            drop(Box::from_raw(self.fdt.load(Ordering::Relaxed)));
            let a = self.file_lock.get_mut();
            let a = match a {
                Ok(a) => a,
                Err(p) => p.into_inner(),
            };
            for (&p, _) in a.files.iter() {
                drop(RcuRef::from_raw(p as *mut File<V>));
            }
        }
    }
}

#[cfg(all(test, not(uvfs_loom)))]
mod tests {
    use super::*;

    #[test]
    fn bitmap_helpers() {
        let mut m = vec![0u64; 2];
        assert_eq!(find_next_zero_bit(&m, 128, 0), 0);
        m[0] = u64::MAX;
        assert_eq!(find_next_zero_bit(&m, 128, 0), 64);
        assert_eq!(find_next_zero_bit(&m, 128, 70), 70);
        m[1] = u64::MAX;
        assert_eq!(find_next_zero_bit(&m, 128, 5), 128);
        assert_eq!(find_next_set(&[0, 1 << 3], 128, 0), 67);
        assert_eq!(find_next_set(&[0, 0], 128, 0), 128);
    }

    #[test]
    fn alloc_lowest_with_full_words() {
        let t = FdTable::new();
        for i in 0..200 {
            assert_eq!(t.alloc_fd(0, false).unwrap(), i);
        }
        t.put_unused_fd(70);
        t.put_unused_fd(3);
        assert_eq!(t.alloc_fd(0, false).unwrap(), 3);
        assert_eq!(t.alloc_fd(0, false).unwrap(), 70);
        assert_eq!(t.alloc_fd(0, false).unwrap(), 200);
        assert_eq!(t.alloc_fd(500, false).unwrap(), 500);
        assert_eq!(
            t.alloc_fd(0, false).unwrap(),
            201,
            "F_DUPFD above next_fd leaves the hint"
        );
        t.set_rlimit(202).unwrap();
        assert_eq!(t.alloc_fd(0, false), Err(Errno::EMFILE));
    }
}
