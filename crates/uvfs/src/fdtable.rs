//! `FdTable`: a task's file descriptor table, looked up without locks.
//!
//! Linux analogue: `struct files_struct`/`struct fdtable` and fs/file.c (`__fget_files_rcu`,
//! `fdget`, `alloc_fd`, `fd_install`, `do_dup2`, `close_range`, `dup_fd`, `expand_fdtable`).
//!
//! # Design
//! - The slot array (`Fdt`) is published through an atomic pointer; a replaced array is kept
//!   until the table drops (at most as many slots again as the current one), so a reader
//!   needs no pin to read it. `fget` pins the epoch (the `File`s are freed through it), loads
//!   the array and the slot, takes a reference with one `fetch_add`
//!   ([`FileRef::get`](crate::sync::file_ref::FileRef::get)), then re-checks both the slot and
//!   the array pointer; if either changed it puts the reference and retries. No lock, no
//!   write to any line but the file's counter.
//! - `fdget` takes no reference when the table is not shared (one task): nobody else can
//!   close the descriptor while the call runs (Linux `__fget_light`). On a shared table a
//!   `Task` borrows instead of counting (`fdget_borrow`): it
//!   publishes the file in one of its own borrow slots ([`crate::sync::borrow`]) and
//!   re-checks the descriptor, writing no line another thread uses; a writer that drops the
//!   table's last slot of a file pays the borrows of it it finds with real references
//!   (`pay_debts_locked`), so the file's last put still comes after the borrowing call, as
//!   with Linux's counted `fget`.
//! - Writers (allocation, install, close, dup2, growth) hold `file_lock`, which sits on its
//!   own cache line, per table (no global lock). The one owner of a private table (one
//!   task, never exposed: the same condition as `fdget`'s) writes without it
//!   (`FilesRef`): nobody else can reach the table during the call, so `open`, `close`,
//!   `dup` and `dup2` there execute no locked instruction of the table's. Allocation is "lowest free fd" with the
//!   `next_fd` hint and a two-level bitmap (`full_fds_bits`: one bit per full 64-fd word).
//!   Close-on-exec bits are written only when they change.
//! - Growth copies the slots into a bigger array and publishes it; readers of the old array
//!   see stale slots only until their re-check of the array pointer (Linux frees the old
//!   array after an RCU grace period; uvfs keeps it, so borrowers need no pin).
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
//! A borrow (`fdget_borrow`) survives the same three by its SeqCst re-check against the
//! writer's SeqCst fence before it pays debts (the Dekker pair of [`crate::sync::borrow`]):
//! either the re-check sees the change and the borrow is retried, or the writer sees the
//! borrow and pays it before dropping the table's reference.
//!
//! Lock order: `file_lock` is a leaf (no other uvfs lock is taken while holding it; the
//! puts of replaced or closed files run after it is released).

use crate::file::{File, FileHandle};
use crate::sync::borrow::{self, BorrowSlots};
use crate::sync::epoch;
use crate::sync::padded::{CacheLine, LineWords};
use crate::sync::rcu::RcuRef;
use crate::sync::rcu::RcuRefcounted as _;
use crate::sync::refcount::RefCount;
use crate::sync::{fence, lock, plain, AtomicPtr, MutPtr, Mutex, MutexGuard, Ordering, UnsafeCell};
use crate::variant::{Uvfs, Variant};
use crate::{Errno, Result};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr;
use std::sync::Arc;

/// Initial number of slots (`NR_OPEN_DEFAULT` = `BITS_PER_LONG`).
pub const NR_OPEN_DEFAULT: u32 = 64;
/// Largest table size (`sysctl_nr_open`'s default, 1 << 20).
pub const NR_OPEN: u32 = 1 << 20;
/// Default per-table descriptor limit (`RLIMIT_NOFILE` soft limit on Linux: 1024).
pub const RLIMIT_NOFILE_DEFAULT: u32 = 1024;

/// What [`FdTable::load_slot`] finds: the array, the slot and the file pointer it held.
type Slot<'a, V> = (*mut Fdt<V>, &'a AtomicPtr<File<V>>, *mut File<V>);

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
    open_fds: LineWords,
    /// One bit per `open_fds` word: the word is full.
    full_fds_bits: LineWords,
    /// One bit per fd: close on exec.
    close_on_exec: LineWords,
    /// Slots in the published array.
    max_fds: u32,
    /// Descriptor limit (`RLIMIT_NOFILE`): allocations at or above it fail with `EMFILE`.
    rlimit: u32,
    /// The borrow slots of the tasks that may borrow from this table (registered by
    /// [`FdTable::register_borrower`]; an entry whose task has gone, strong count 1, is
    /// dropped at the next registration).
    borrowers: Vec<Arc<BorrowSlots>>,
    /// Arrays replaced by growth, kept until the table drops (borrowers read them unpinned).
    retired: Vec<Box<dyn Send + Sync>>,
}

#[inline]
fn test_bit(map: &LineWords, i: u32) -> bool {
    map[(i / 64) as usize] & (1u64 << (i % 64)) != 0
}

/// Index of the first zero bit at or after `start`, or `size` if none below `size`.
fn find_next_zero_bit(map: &LineWords, size: u32, start: u32) -> u32 {
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
            open_fds: LineWords::zeroed(words),
            full_fds_bits: LineWords::zeroed(words.div_ceil(64)),
            close_on_exec: LineWords::zeroed(words),
            max_fds,
            rlimit: RLIMIT_NOFILE_DEFAULT,
            borrowers: Vec::new(),
            retired: Vec::new(),
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

/// `file_lock` and the allocation state it guards, side by side rather than one
/// `Mutex<FdAlloc>`: writers of a shared table take the lock; the one owner of a private
/// table (`FilesRef`) reaches the state without it.
struct FileLock {
    lock: Mutex<()>,
    alloc: UnsafeCell<FdAlloc>,
}

// SAFETY: `alloc` is accessed only through an `AllocGuard`, made either under `lock` or by the
// single owner of a private table, whose contract (`FdTable::private`) is that no other
// thread can reach the table meanwhile; so accesses never overlap. `FdAlloc` is `Send`.
unsafe impl Sync for FileLock {}

impl FileLock {
    fn new(a: FdAlloc) -> FileLock {
        FileLock {
            lock: Mutex::new(()),
            alloc: UnsafeCell::new(a),
        }
    }
}

/// Write access to a table's `FdAlloc`: under `file_lock`, or as a private table's owner.
/// Only a holder of one has a `&FdAlloc`, which the `*_locked` helpers take as proof.
struct AllocGuard<'a> {
    // Declared first, so dropped first: the access ends (for loom's race check) before the
    // lock is released.
    a: MutPtr<FdAlloc>,
    _lock: Option<MutexGuard<'a, ()>>,
}

impl Deref for AllocGuard<'_> {
    type Target = FdAlloc;
    #[inline]
    fn deref(&self) -> &FdAlloc {
        // SAFETY: the guard's access is exclusive (see `AllocGuard`), and the result borrows
        // the guard.
        unsafe { self.a.deref() }
    }
}

impl std::ops::DerefMut for AllocGuard<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut FdAlloc {
        // SAFETY: as for `deref`; `&mut self` makes the result unique.
        unsafe { self.a.deref() }
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
    /// table; replaced only by `expand_locked` under `file_lock`, the old one kept in
    /// `FdAlloc::retired` until the table drops. A `sync::AtomicPtr` rather than crossbeam's `Atomic` so that under
    /// `--cfg uvfs_loom` its publication is a loom atomic: loom then sees that a new array's
    /// slots are created before `fget` loads them (with crossbeam's `Atomic`, a real atomic
    /// loom cannot see, it reports a causality violation) and models the re-check of race 3.
    fdt: CacheLine<AtomicPtr<Fdt<V>>>,
    file_lock: CacheLine<FileLock>,
    /// Set (once, sticky) when a reference to this table left its tasks' hands
    /// (`Task::files`): from then on `fdget` treats the table as shared (a borrow or a
    /// counted reference) and its writers take `file_lock`, because some other thread may
    /// hold the table without holding a `Task` (read on every `fdget`, written once).
    exposed: plain::AtomicBool,
}

impl<V: Variant> fmt::Debug for FdTable<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = self.shared().alloc();
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
/// through the task's borrow slots when it is, by a counted handle when those are full (or
/// for the `counted-fget` variant). Two words.
#[derive(Debug)]
pub enum FdRef<'a, V: Variant = Uvfs> {
    /// No reference taken: the table has one user, which is the caller.
    Borrowed(&'a File<V>),
    /// A counted reference from `fget`.
    Owned(FileHandle<V>),
    /// Borrowed from a shared table through the task's borrow slots (no reference taken).
    Lent(Debt<'a, V>),
}

// Two words, as before borrows existed: `Result<FdRef>` is returned in registers by every
// descriptor call.
#[cfg(not(uvfs_loom))]
crate::const_assert!(std::mem::size_of::<FdRef<'static>>() == 16);

/// A file borrowed from a shared table (`FdTable::fdget_borrow`): one of the borrowing
/// task's borrow slots names it. On drop the slot is freed, and if a writer that closed the
/// descriptor meanwhile paid the borrow with a reference, that reference is put (which may be
/// the file's last: it then goes right after the borrowing call, as with a counted `fget`).
/// One word, so that an `FdRef` stays two.
pub struct Debt<'a, V: Variant = Uvfs> {
    /// INVARIANT: names a `File<V>`, alive while the borrow (or its paid reference) lasts.
    borrow: borrow::Borrow<'a>,
    _file: PhantomData<&'a File<V>>,
}

impl<V: Variant> fmt::Debug for Debt<'_, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Debt")
            .field("borrow", &self.borrow)
            .finish()
    }
}

impl<V: Variant> Deref for Debt<'_, V> {
    type Target = File<V>;
    #[inline]
    fn deref(&self) -> &File<V> {
        // SAFETY: the borrow keeps the file alive until `self` drops (INVARIANT), and the
        // result borrows `self`.
        unsafe { &*(self.borrow.addr() as *const File<V>) }
    }
}

impl<V: Variant> Drop for Debt<'_, V> {
    #[inline]
    fn drop(&mut self) {
        let p = self.borrow.addr() as *mut File<V>;
        if self.borrow.release() {
            // SAFETY: a writer paid this borrow: the slot held one reference on the file,
            // which `release` handed to us.
            drop(unsafe { RcuRef::from_raw(p) });
        }
    }
}

impl<V: Variant> Deref for FdRef<'_, V> {
    type Target = File<V>;
    #[inline]
    fn deref(&self) -> &File<V> {
        match self {
            FdRef::Borrowed(f) => f,
            FdRef::Owned(h) => h,
            FdRef::Lent(d) => d,
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
            file_lock: CacheLine(FileLock::new(FdAlloc::new(NR_OPEN_DEFAULT))),
            exposed: plain::AtomicBool::new(false),
        }
    }

    /// This table for a call by any thread: its writers take `file_lock`.
    #[inline]
    pub(crate) fn shared(&self) -> FilesRef<'_, V> {
        FilesRef {
            t: self,
            private: false,
        }
    }

    /// This table for a call by its one owner: writers skip `file_lock`.
    ///
    /// # Safety
    /// For as long as the result and anything made from it live, no other thread can reach
    /// this table: the caller is the only task holding it (its `Arc` has one strong count,
    /// none was lent out, so no `Weak` exists), it was never [`expose`](Self::expose)d, and
    /// the caller cannot lend it meanwhile (`Task` is `!Sync`, and it clones the `Arc` only
    /// in `clone_thread`, which is not called during a table operation). The caller also
    /// orders itself after the table's former users (an Acquire fence after reading the
    /// strong count 1, pairing with the Release decrement of their `Arc` drops).
    #[inline]
    pub(crate) unsafe fn private(&self) -> FilesRef<'_, V> {
        FilesRef {
            t: self,
            private: true,
        }
    }

    /// The published array. Arrays live as long as the table (a replaced one is kept in
    /// `FdAlloc::retired`), so the result may be read for as long as `&self` is borrowed;
    /// its slots may be stale once growth has replaced it (readers re-check the pointer).
    #[inline]
    fn fdt(&self) -> &Fdt<V> {
        // Acquire: pairs with the Release swap in `expand_locked`: the new array's slots
        // (created and copied before the swap) are visible.
        let p = self.fdt.load(Ordering::Acquire);
        // SAFETY: never null (INVARIANT of `new`/`dup_fd`/`expand_locked`); an array is freed
        // only when the table drops, which `&self` rules out.
        unsafe { &*p }
    }

    /// The published array. Context: the caller holds `file_lock` (`_a` is the state it
    /// guards: only a holder has one) for as long as it uses the result; under the lock the
    /// array can be neither replaced nor retired.
    #[inline]
    fn fdt_locked(&self, _a: &FdAlloc) -> &Fdt<V> {
        self.fdt()
    }

    /// The lock-free lookup `fget` and `fdget_borrow` start from: the array, the slot of
    /// `fd` (`fd >= 0`) and the file pointer it holds, not yet referenced.
    ///
    /// # Errors
    /// `EBADF` if `fd` is beyond the array or its slot is empty.
    #[inline(always)]
    fn load_slot(&self, fd: i32) -> Result<Slot<'_, V>> {
        // Acquire: pairs with the Release swap in `expand_locked`: the new array's slots
        // (created and copied before the swap) are visible.
        let fdt_p = self.fdt.load(Ordering::Acquire);
        // SAFETY: never null (INVARIANT of `new`/`dup_fd`/`expand_locked`), freed only when
        // the table drops (replaced arrays are retired, not freed; see `fdt`).
        let fdt = unsafe { &*fdt_p };
        let slot = fdt.fd.get(fd as usize).ok_or(Errno::EBADF)?;
        // Acquire: pairs with the Release stores in `fd_install`/`install`/`dup2`: the
        // File's fields are initialised.
        let p = slot.load(Ordering::Acquire);
        if p.is_null() {
            return Err(Errno::EBADF);
        }
        Ok((fdt_p, slot, p))
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
            let (fdt_p, slot, p) = self.load_slot(fd)?;
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
        let fdt = self.fdt();
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

    /// `fdget` of a shared table without a shared write: the file at `fd`, borrowed through
    /// the borrow slots `b` ([`crate::sync::borrow`]), or counted (as [`fget`](Self::fget))
    /// when every slot of `b` is in use. The borrow writes only `b`'s line: two threads
    /// `fstat`ing one descriptor share no written line.
    ///
    /// # Safety
    /// - `b` was registered in this table by [`register_borrower`](Self::register_borrower)
    ///   and only the calling thread publishes in it (its task's slots).
    ///
    /// # Errors
    /// As [`fget`](Self::fget).
    #[inline]
    pub(crate) unsafe fn fdget_borrow<'a>(
        &'a self,
        fd: i32,
        b: &'a BorrowSlots,
    ) -> Result<FdRef<'a, V>> {
        if fd < 0 {
            return Err(Errno::EBADF);
        }
        loop {
            let (fdt_p, slot, p) = self.load_slot(fd)?;
            let Some(borrow) = b.publish(p as usize) else {
                return self.fget(fd).map(FdRef::Owned);
            };
            // SeqCst: the borrower's re-check, the load half of its Dekker pair with a
            // writer's `removal_fence` in `pay_debts_locked` (sync/borrow.rs): either these
            // loads see the writer's removal (or growth), or its scan sees our publication.
            if slot.load(Ordering::SeqCst) == p && self.fdt.load(Ordering::SeqCst) == fdt_p {
                return Ok(FdRef::Lent(Debt {
                    // INVARIANT: the table held `p` after our publication was visible to
                    // every later remover, which pays us before dropping its reference.
                    borrow,
                    _file: PhantomData,
                }));
            }
            // Races 1-3: the descriptor changed; undo and retry.
            if borrow.release() {
                // SAFETY: a writer paid the borrow: the reference is ours.
                drop(unsafe { RcuRef::from_raw(p) });
            }
        }
    }

    /// New borrow slots for a task that uses this table, registered so that writers pay its
    /// borrows. Drops the entries of tasks that have gone (only the table holds them).
    /// Rare: once per task that `fdget`s this table while it is shared.
    pub(crate) fn register_borrower(&self) -> Arc<BorrowSlots> {
        let mut a = self.shared().alloc();
        a.borrowers.retain(|b| Arc::strong_count(b) > 1);
        let b = Arc::new(BorrowSlots::default());
        a.borrowers.push(b.clone());
        b
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
        a.open_fds.resize(words);
        a.close_on_exec.resize(words);
        a.full_fds_bits.resize(words.div_ceil(64));
        a.max_fds = n;
        // Release: publishes the new array's slots (created and copied above) to the Acquire
        // loads of the array in `fget` and `fdt`. No Acquire: the old array was published to
        // us by `file_lock`. INVARIANT: the new pointer is not null.
        let old_p = self.fdt.swap(Box::into_raw(new), Ordering::Release);
        // SAFETY: `old_p` came from `Box::into_raw` and is unreachable from `self.fdt` now;
        // only this writer, under the lock, takes it back. Its slots own no references (the
        // new array's do), and `Fdt` has no `Drop` that touches files. Kept, not freed:
        // readers that loaded it (`fget`, borrowers, unpinned) may still read its slots.
        a.retired.push(unsafe { Box::from_raw(old_p) });
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

    /// The file in slot `fd`, NULL if none or out of range. Context: caller holds `file_lock`.
    fn slot_load_locked(&self, a: &FdAlloc, fd: u32) -> *mut File<V> {
        if fd >= a.max_fds {
            return ptr::null_mut();
        }
        let fdt = self.fdt_locked(a);
        // Relaxed: under the lock, the only writer.
        fdt.fd[fd as usize].load(Ordering::Relaxed)
    }

    fn installed_locked(&self, a: &FdAlloc, fd: u32) -> bool {
        !self.slot_load_locked(a, fd).is_null()
    }

    /// Allocates the lowest descriptor `>= start` and installs `file` there in one step
    /// (`dup`, `F_DUPFD`).
    ///
    /// # Errors
    /// `EMFILE` if none is free below the limit (then `file` is dropped).
    pub fn install(&self, file: FileHandle<V>, start: u32, cloexec: bool) -> Result<u32> {
        self.shared().install(file, start, cloexec)
    }

    /// `dup`/`F_DUPFD`: the lowest free descriptor `>= start`, naming the file at `oldfd`.
    /// Takes no reference on the file (the table already holds one): writes only this
    /// table's lines.
    ///
    /// # Errors
    /// `EBADF` if `oldfd` is not open; `EMFILE` if no descriptor is free below the limit.
    pub fn dup_from(&self, oldfd: i32, start: u32, cloexec: bool) -> Result<u32> {
        self.shared().dup_from(oldfd, start, cloexec)
    }

    /// `close(fd)`: removes the descriptor and drops its reference (`file_close_fd` +
    /// `filp_close`), after the file system's `->flush` for a file that has one.
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open; the file system's flush error (the descriptor is
    /// closed all the same, as Linux's).
    pub fn close_fd(&self, fd: i32) -> Result<()> {
        self.shared().close_fd(fd)
    }

    /// `do_dup2`: makes `newfd` refer to the file at `oldfd`, closing what `newfd` held.
    /// Returns `newfd`. `oldfd == newfd` is the caller's business (dup2 vs dup3 differ).
    ///
    /// # Errors
    /// `EBADF` if `oldfd` is not open or `newfd` is at or above the limit; `EBUSY` if `newfd`
    /// is reserved by an `open` in progress (Linux returns the same); `EMFILE` if the table
    /// cannot grow that far.
    pub fn dup2(&self, oldfd: i32, newfd: i32, cloexec: bool) -> Result<i32> {
        self.shared().dup2(oldfd, newfd, cloexec)
    }

    /// The close-on-exec flag of `fd` (`F_GETFD`).
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open.
    pub fn get_cloexec(&self, fd: i32) -> Result<bool> {
        self.shared().get_cloexec(fd)
    }

    /// Sets the close-on-exec flag of `fd` (`F_SETFD`); writes only when it changes.
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open.
    pub fn set_cloexec(&self, fd: i32, on: bool) -> Result<()> {
        self.shared().set_cloexec(fd, on)
    }

    /// `close_range(first, last)` without flags: closes every open descriptor in the range.
    pub fn close_range(&self, first: u32, last: u32) {
        self.shared().close_range(first, last)
    }

    /// `close_range(.., CLOSE_RANGE_CLOEXEC)`: marks every open descriptor in the range
    /// close-on-exec.
    pub fn set_cloexec_range(&self, first: u32, last: u32) {
        self.shared().set_cloexec_range(first, last)
    }

    /// `do_close_on_exec`: closes every descriptor marked close-on-exec.
    pub fn close_on_exec(&self) {
        self.shared().close_on_exec()
    }

    /// `dup_fd`: a copy of this table for `fork` (or `CLOSE_RANGE_UNSHARE`): the same files,
    /// one more reference each (one per file, not per slot), the same close-on-exec bits and limit. Descriptors reserved
    /// by an `open` in progress are not copied.
    pub fn dup_fd(&self) -> FdTable<V> {
        let a = self.shared().alloc();
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
            file_lock: CacheLine(FileLock::new(na)),
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
        self.shared().alloc().rlimit
    }

    /// Sets the descriptor limit. Existing descriptors above it stay open (as Linux).
    ///
    /// # Errors
    /// `EPERM` above `NR_OPEN` (2^20), as `setrlimit` beyond `nr_open`.
    pub fn set_rlimit(&self, n: u32) -> Result<()> {
        if n > NR_OPEN {
            return Err(Errno::EPERM);
        }
        self.shared().alloc().rlimit = n;
        Ok(())
    }

    /// Number of allocated descriptors (installed or reserved); a snapshot.
    pub fn open_count(&self) -> usize {
        let a = self.shared().alloc();
        a.open_fds.iter().map(|w| w.count_ones() as usize).sum()
    }
}

/// A descriptor table as one call sees it: shared (writers take `file_lock`) or private to
/// the calling task (writers skip it). `Task` makes one per call with
/// [`FdTable::private`] when the table is not shared, as `fdget` decides whether to take a
/// reference (Linux `__fget_light`; Linux's writers always take `file_lock`, a spinlock
/// whose unlock is a plain store, where a userspace mutex costs two locked instructions).
pub(crate) struct FilesRef<'a, V: Variant> {
    t: &'a FdTable<V>,
    /// Made by `FdTable::private`, whose contract holds for `'a`.
    private: bool,
}

impl<V: Variant> Clone for FilesRef<'_, V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<V: Variant> Copy for FilesRef<'_, V> {}

impl<'a, V: Variant> FilesRef<'a, V> {
    /// Write access to the allocation state: `file_lock` taken unless the table is private.
    #[inline]
    fn alloc(&self) -> AllocGuard<'a> {
        let fl: &'a FileLock = &self.t.file_lock;
        let g = (!self.private).then(|| lock(&fl.lock));
        AllocGuard {
            a: fl.alloc.get_mut(),
            _lock: g,
        }
    }

    /// Pays the other tasks' borrows of `p` (`BorrowSlots::pay`): called once the table's
    /// last slot naming `p` is cleared and before the table's reference on it is dropped.
    /// Context: `a` is this call's guard. A private table has no other task, hence no
    /// borrower to pay; a table no task ever borrowed from has none registered.
    fn pay_debts_locked(&self, a: &FdAlloc, p: *mut File<V>) {
        if self.private || a.borrowers.is_empty() {
            return;
        }
        borrow::removal_fence();
        // SAFETY: the table still holds its reference on `p` (Context).
        let f = unsafe { &*p };
        for b in &a.borrowers {
            b.pay(
                p as usize,
                || f.file_ref().inc(),
                || {
                    let last = f.file_ref().put();
                    debug_assert!(!last, "the table's reference is still held");
                },
            );
        }
    }

    /// `alloc_fd`: reserves the lowest free descriptor `>= start`.
    ///
    /// # Errors
    /// `EMFILE` if none is free below the limit.
    pub(crate) fn alloc_fd(&self, start: u32, cloexec: bool) -> Result<u32> {
        let mut a = self.alloc();
        self.t.alloc_fd_locked(&mut a, start, cloexec)
    }

    /// `put_unused_fd`: gives back a descriptor reserved by `alloc_fd` and never installed.
    pub(crate) fn put_unused_fd(&self, fd: u32) {
        let mut a = self.alloc();
        if a.is_open(fd) {
            a.clear_open(fd);
            a.next_fd = a.next_fd.min(fd);
        }
    }

    /// `fd_install`: publishes `file` at descriptor `fd`, reserved by `alloc_fd`.
    pub(crate) fn fd_install(&self, fd: u32, file: FileHandle<V>) {
        let mut a = self.alloc();
        let extra = FdTable::<V>::adopt_locked(&mut a, file);
        let old = self.t.slot_store_locked(&a, fd, extra.0);
        debug_assert!(old.is_null(), "fd_install over an installed slot");
        drop(a);
        drop(extra.1);
    }

    /// [`FdTable::install`] (its errors), without `file_lock` on a private table.
    pub(crate) fn install(&self, file: FileHandle<V>, start: u32, cloexec: bool) -> Result<u32> {
        let mut a = self.alloc();
        let fd = self.t.alloc_fd_locked(&mut a, start, cloexec)?;
        let (p, extra) = FdTable::<V>::adopt_locked(&mut a, file);
        self.t.slot_store_locked(&a, fd, p);
        drop(a);
        drop(extra);
        Ok(fd)
    }

    /// [`FdTable::dup_from`] (its errors), without `file_lock` on a private table.
    pub(crate) fn dup_from(&self, oldfd: i32, start: u32, cloexec: bool) -> Result<u32> {
        let mut a = self.alloc();
        let old = u32::try_from(oldfd).map_err(|_| Errno::EBADF)?;
        let p = self.t.slot_load_locked(&a, old);
        if p.is_null() {
            return Err(Errno::EBADF);
        }
        let fd = self.t.alloc_fd_locked(&mut a, start, cloexec)?;
        let first = a.slot_get(p);
        debug_assert!(!first, "an installed file is already counted");
        self.t.slot_store_locked(&a, fd, p);
        Ok(fd)
    }

    /// [`FdTable::close_fd`] (its errors), without `file_lock` on a private table.
    pub(crate) fn close_fd(&self, fd: i32) -> Result<()> {
        let (file, last) = {
            let mut a = self.alloc();
            let fd = u32::try_from(fd).map_err(|_| Errno::EBADF)?;
            if fd >= a.max_fds {
                return Err(Errno::EBADF);
            }
            let fdt = self.t.fdt_locked(&a);
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
                if !f.wants_flush() && f.inode().flctx().is_none() {
                    // No shared write at all.
                    return Ok(());
                }
                // A reference of our own for the flush and the lock removal, which must
                // not run under the lock (a FUSE file system's flush waits on its server;
                // the inode's lock-context lock is not taken under `file_lock`).
                // SAFETY: `p` is the table's reference, not given up: the clone is a new
                // one, and `ManuallyDrop` leaves the table's alone.
                let mine = (*std::mem::ManuallyDrop::new(unsafe { RcuRef::from_raw(p) })).clone();
                (mine, false)
            } else {
                self.pay_debts_locked(&a, p);
                // SAFETY: that was the table's last slot naming the file: its reference is
                // ours.
                (unsafe { RcuRef::from_raw(p) }, true)
            }
        };
        let r = file.flush();
        // `filp_close` -> `locks_remove_posix`: the table's POSIX locks on the inode go at
        // the close of any of its descriptors of it.
        crate::locks::remove_posix(&file, self.t.lock_owner());
        if last {
            RcuRef::put_close(file);
        } else {
            drop(file);
        }
        r
    }

    /// [`FdTable::dup2`] (its errors), without `file_lock` on a private table.
    pub(crate) fn dup2(&self, oldfd: i32, newfd: i32, cloexec: bool) -> Result<i32> {
        let tofree = {
            let mut a = self.alloc();
            let new = u32::try_from(newfd).map_err(|_| Errno::EBADF)?;
            if new >= a.rlimit {
                return Err(Errno::EBADF);
            }
            let old = u32::try_from(oldfd).map_err(|_| Errno::EBADF)?;
            if new >= a.max_fds {
                self.t.expand_locked(&mut a, new)?;
            }
            let file = self.t.slot_load_locked(&a, old);
            if file.is_null() {
                return Err(Errno::EBADF);
            }
            let cur = self.t.slot_load_locked(&a, new);
            if cur.is_null() && a.is_open(new) {
                return Err(Errno::EBUSY);
            }
            // `file` is installed: the table already holds its reference.
            a.slot_get(file);
            let prev = self.t.slot_store_locked(&a, new, file);
            a.set_open(new);
            a.set_cloexec(new, cloexec);
            if prev.is_null() {
                None
            } else if a.slot_put(prev) {
                self.pay_debts_locked(&a, prev);
                // SAFETY: that was the table's last slot naming it: its reference is ours.
                Some((unsafe { RcuRef::from_raw(prev) }, true))
            } else {
                // SAFETY: other slots still name it: the table's reference keeps it alive.
                let f = unsafe { &*prev };
                // A reference of our own for the lock removal, only when there are locks.
                f.inode().flctx().map(|_| {
                    // SAFETY: as in `close_fd`: a new reference, the table's left alone.
                    let h = unsafe { RcuRef::from_raw(prev) };
                    ((*std::mem::ManuallyDrop::new(h)).clone(), false)
                })
            }
        };
        if let Some((f, last)) = tofree {
            // `do_dup2` -> `filp_close` of what `newfd` named: its POSIX locks go.
            crate::locks::remove_posix(&f, self.t.lock_owner());
            if last {
                RcuRef::put_close(f);
            }
        }
        Ok(newfd)
    }

    /// Whether descriptor `fd` names file `f`, read under `file_lock` (skipped on a private
    /// table: no other thread can close it). `fcntl_setlk`'s re-check after setting a
    /// classic lock (Linux `files_lookup_fd_locked` under `files->file_lock`): a close of
    /// `fd` clears the slot under the same lock and looks for the inode's locks after it,
    /// so either its critical section comes first (this returns `false` and the setter
    /// removes its locks) or ours does, and then the close, ordered after the setter's
    /// lock by this acquire-release pair, sees the lock context and the lock and removes
    /// it. A lockless load here would be one half of a store-buffering pattern with the
    /// close's lockless load of the lock context (locks.rs `holds_any`, the
    /// `flctx().is_none()` fast path above), which may then both read old values.
    pub(crate) fn names(&self, fd: i32, f: &File<V>) -> bool {
        let a = self.alloc();
        let Ok(fd) = u32::try_from(fd) else {
            return false;
        };
        ptr::eq(self.t.slot_load_locked(&a, fd), f)
    }

    /// [`FdTable::get_cloexec`] (its errors), without `file_lock` on a private table.
    pub(crate) fn get_cloexec(&self, fd: i32) -> Result<bool> {
        let a = self.alloc();
        let fd = u32::try_from(fd).map_err(|_| Errno::EBADF)?;
        if !self.t.installed_locked(&a, fd) {
            return Err(Errno::EBADF);
        }
        Ok(test_bit(&a.close_on_exec, fd))
    }

    /// [`FdTable::set_cloexec`] (its errors), without `file_lock` on a private table.
    pub(crate) fn set_cloexec(&self, fd: i32, on: bool) -> Result<()> {
        let mut a = self.alloc();
        let fd = u32::try_from(fd).map_err(|_| Errno::EBADF)?;
        if !self.t.installed_locked(&a, fd) {
            return Err(Errno::EBADF);
        }
        a.set_cloexec(fd, on);
        Ok(())
    }

    /// Removes the installed descriptors in `first ..= last` for which `pick(fd, cloexec)`
    /// holds and returns the files whose last slot went (`true`: the table's reference),
    /// and, with a reference of their own, the others whose inode has locks (`false`).
    /// Context: none (takes `file_lock`).
    fn take_range(
        &self,
        first: u32,
        last: u32,
        pick: impl Fn(bool) -> bool,
    ) -> Vec<(FileHandle<V>, bool)> {
        let mut a = self.alloc();
        let mut out = Vec::new();
        if first >= a.max_fds {
            return out;
        }
        let last = last.min(a.max_fds - 1);
        let fdt = self.t.fdt_locked(&a);
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
                    self.pay_debts_locked(&a, p);
                    // SAFETY: the table's last slot naming it: its reference is ours.
                    out.push((unsafe { RcuRef::from_raw(p) }, true));
                } else {
                    // SAFETY: other slots still name it: the table's reference keeps it
                    // alive while we hold the lock.
                    if unsafe { &*p }.inode().flctx().is_some() {
                        // SAFETY: as in `close_fd`: a new reference, the table's left alone.
                        let h = unsafe { RcuRef::from_raw(p) };
                        out.push(((*std::mem::ManuallyDrop::new(h)).clone(), false));
                    }
                }
            }
            fd += 1;
        }
        out
    }

    /// [`FdTable::close_range`] (its errors), without `file_lock` on a private table.
    pub(crate) fn close_range(&self, first: u32, last: u32) {
        self.close_taken(self.take_range(first, last, |_| true));
    }

    /// `filp_close` of what `take_range` removed: each file's POSIX locks of this table go,
    /// and the table's references.
    fn close_taken(&self, files: Vec<(FileHandle<V>, bool)>) {
        for (f, last) in files {
            crate::locks::remove_posix(&f, self.t.lock_owner());
            if last {
                RcuRef::put_close(f);
            }
        }
    }

    /// [`FdTable::set_cloexec_range`] (its errors), without `file_lock` on a private table.
    pub(crate) fn set_cloexec_range(&self, first: u32, last: u32) {
        let mut a = self.alloc();
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

    /// [`FdTable::close_on_exec`] (its errors), without `file_lock` on a private table.
    pub(crate) fn close_on_exec(&self) {
        self.close_taken(self.take_range(0, u32::MAX, |cloexec| cloexec));
    }
}

fn find_next_set(map: &LineWords, size: u32, start: u32) -> u32 {
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

impl<V: Variant> FdTable<V> {
    /// This table as the owner of classic POSIX locks (Linux `current->files`): its address,
    /// which stays while it lives and whose locks all go before it is freed (`Drop`).
    #[inline]
    pub(crate) fn lock_owner(&self) -> usize {
        self as *const FdTable<V> as usize
    }
}

impl<V: Variant> Drop for FdTable<V> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no reader can hold this table any more. The array came from
        // `Box::into_raw` (`new`/`dup_fd`/`expand_locked`); the table holds one reference per
        // key of `files` (FdAlloc INVARIANT).
        unsafe {
            // Relaxed: exclusive access.
            drop(Box::from_raw(self.fdt.load(Ordering::Relaxed)));
            let owner = self.lock_owner();
            let a = self.file_lock.alloc.get_mut();
            for (&p, _) in a.deref().files.iter() {
                let f = RcuRef::from_raw(p as *mut File<V>);
                // The table goes (`exit_files` -> `filp_close`): its POSIX locks go.
                crate::locks::remove_posix(&f, owner);
                drop(f);
            }
        }
    }
}

#[cfg(all(test, not(uvfs_loom)))]
mod tests {
    use super::*;

    #[test]
    fn bitmap_helpers() {
        let mut m = LineWords::zeroed(2);
        assert_eq!(find_next_zero_bit(&m, 128, 0), 0);
        m[0] = u64::MAX;
        assert_eq!(find_next_zero_bit(&m, 128, 0), 64);
        assert_eq!(find_next_zero_bit(&m, 128, 70), 70);
        m[1] = u64::MAX;
        assert_eq!(find_next_zero_bit(&m, 128, 5), 128);
        let mut s = LineWords::zeroed(2);
        assert_eq!(find_next_set(&s, 128, 0), 128);
        s[1] = 1 << 3;
        assert_eq!(find_next_set(&s, 128, 0), 67);
    }

    #[test]
    fn alloc_lowest_with_full_words() {
        // The same allocations under `file_lock` and as a private table's owner.
        for private in [false, true] {
            let table = FdTable::new();
            let t = if private {
                // SAFETY: `table` is local to this thread.
                unsafe { table.private() }
            } else {
                table.shared()
            };
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
            table.set_rlimit(202).unwrap();
            assert_eq!(t.alloc_fd(0, false), Err(Errno::EMFILE));
        }
    }
}
