//! The conflict audit's recorder (feature `audit`): in an audit build every atomic and lock
//! of `crate::sync` is a wrapper that, while the calling thread is inside a window
//! ([`begin`]..[`end`]), records which cache line it touched, whether it wrote it, whether
//! the access is a locked instruction on x86, and the source line of the access.
//!
//! `uvfs bench --audit` runs two threads' operations inside windows and reports the lines
//! one thread wrote that the other touched: COMMUTER's conflict (A. Clements et al., "The
//! Scalable Commutativity Rule", SOSP 2013), which on a cache-coherent machine is a
//! cache-line transfer, whatever the core count. Outside a window a wrapper costs a
//! thread-local flag test; in a build without the feature the wrappers do not exist (the
//! `std` types are used directly).
//!
//! What a wrapper records, as the x86-64 code `std` emits for it (locked = `lock`-prefixed,
//! `xchg` with memory, or `mfence`; each one also owns the line exclusively, a write):
//!
//! | operation | records |
//! |---|---|
//! | `load` | a read |
//! | `store` | a write; locked if `SeqCst` (`xchg`) |
//! | `swap`, `compare_exchange*` (failed ones too: `lock cmpxchg` takes the line), `fetch_*` | a locked write |
//! | `fence(SeqCst)` | a locked instruction on no line (`mfence`) |
//! | `Mutex::lock`, guard drop | a locked write of the lock word each (`cmpxchg`, `xchg`) |
//! | `RwLock::read`/`write`, guard drop | a locked write of the lock word each |
//! | `UnsafeCell::with` / `get_mut` | a read / a write of the cell |
//!
//! What it cannot see: memory touched without these types (fields written under a lock are
//! covered by the lock word's write; `std::sync::Arc`'s counts, crossbeam-epoch's pin and
//! collection, crossbeam-skiplist's links and the allocator are not). The callgrind driver
//! (tools/callgrind) counts every executed locked instruction; docs/audit.md compares the
//! two per workload.

use std::cell::{Cell, RefCell};
use std::panic::Location;
use std::sync::atomic::Ordering;
use std::sync::{LockResult, PoisonError};

/// One recorded access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// The cache line: the address divided by 64 ([`NO_LINE`] for a fence).
    pub line: usize,
    /// A write (or a read-modify-write, or a locked instruction that owns the line).
    pub write: bool,
    /// A locked instruction on x86-64.
    pub locked: bool,
    /// Where the access was made (the caller of the atomic or lock method; for a guard's
    /// release, the line that took the lock).
    pub at: &'static Location<'static>,
    /// The call stack's return addresses, innermost first (at most [`STACK_DEPTH`]), for
    /// [`describe`].
    pub stack: Box<[usize]>,
    /// For a lock word's write: whether it took the lock or released it (a guard's drop,
    /// recorded at the line that took the lock); `None` for every other access.
    pub lock: Option<LockOp>,
}

/// What a lock word's recorded write did ([`Access::lock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockOp {
    /// `lock`, `read` or `write`: the acquisition.
    Lock,
    /// The guard's drop: the release.
    Unlock,
}

/// Frames kept per access.
pub const STACK_DEPTH: usize = 24;

/// The `line` of an access that touches no memory (`fence(SeqCst)`).
pub const NO_LINE: usize = usize::MAX;

thread_local! {
    /// Inside a window: record.
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    /// This thread's accesses in its current window.
    static LOG: RefCell<Vec<Access>> = const { RefCell::new(Vec::new()) };
}

/// Starts the calling thread's window: accesses from here to [`end`] are recorded.
pub fn begin() {
    let _ = LOG.try_with(|l| l.borrow_mut().clear());
    let _ = ACTIVE.try_with(|a| a.set(true));
}

/// Ends the calling thread's window and returns its accesses, in order.
pub fn end() -> Vec<Access> {
    let _ = ACTIVE.try_with(|a| a.set(false));
    LOG.try_with(|l| std::mem::take(&mut *l.borrow_mut()))
        .unwrap_or_default()
}

/// Records an access to `addr`'s line if the calling thread is in a window.
#[inline]
fn rec<T: ?Sized>(addr: *const T, write: bool, locked: bool, at: &'static Location<'static>) {
    rec_op(addr, write, locked, at, None);
}

/// [`rec`] with the lock operation `lock` ([`Access::lock`]).
#[inline]
fn rec_op<T: ?Sized>(
    addr: *const T,
    write: bool,
    locked: bool,
    at: &'static Location<'static>,
    lock: Option<LockOp>,
) {
    if ACTIVE.try_with(Cell::get).unwrap_or(false) {
        let line = if addr.cast::<u8>().is_null() {
            NO_LINE
        } else {
            addr.cast::<u8>() as usize / 64
        };
        let mut stack = Vec::with_capacity(STACK_DEPTH);
        backtrace::trace(|f| {
            stack.push(f.ip() as usize);
            stack.len() < STACK_DEPTH
        });
        let _ = LOG.try_with(|l| {
            l.borrow_mut().push(Access {
                line,
                write,
                locked,
                at,
                stack: stack.into_boxed_slice(),
                lock,
            })
        });
    }
}

/// `std::sync::atomic::fence`, recorded as a locked instruction when `SeqCst` (`mfence`).
#[track_caller]
#[inline]
pub fn fence(order: Ordering) {
    // Ordering compared, not used: only a SeqCst fence is an `mfence`.
    if order == Ordering::SeqCst {
        rec(std::ptr::null::<u8>(), true, true, Location::caller());
    }
    std::sync::atomic::fence(order)
}

/// Defines the wrapper `$name` (generic over `$g` if given) of the atomic `$std` holding a
/// `$t`, with the methods every atomic has.
macro_rules! atomic_common {
    ($name:ident $(<$g:ident>)?, $std:ty, $t:ty) => {
        #[doc = concat!("`", stringify!($std), "` that records its accesses (see the module doc).")]
        #[repr(transparent)]
        pub struct $name$(<$g>)?($std);

        impl$(<$g>)? Default for $name$(<$g>)? {
            fn default() -> Self {
                Self(<$std>::default())
            }
        }

        impl$(<$g>)? std::fmt::Debug for $name$(<$g>)? {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }

        impl$(<$g>)? From<$t> for $name$(<$g>)? {
            fn from(v: $t) -> Self {
                Self::new(v)
            }
        }

        impl$(<$g>)? $name$(<$g>)? {
            /// A new atomic holding `v`.
            pub const fn new(v: $t) -> Self {
                Self(<$std>::new(v))
            }
            /// `load` (a read).
            #[track_caller]
            #[inline]
            pub fn load(&self, order: Ordering) -> $t {
                rec(self, false, false, Location::caller());
                self.0.load(order)
            }
            /// `store` (a write; locked if `SeqCst`).
            #[track_caller]
            #[inline]
            pub fn store(&self, v: $t, order: Ordering) {
                // Ordering compared, not used: a SeqCst store is an `xchg`.
                rec(self, true, order == Ordering::SeqCst, Location::caller());
                self.0.store(v, order)
            }
            /// `swap` (a locked write).
            #[track_caller]
            #[inline]
            pub fn swap(&self, v: $t, order: Ordering) -> $t {
                rec(self, true, true, Location::caller());
                self.0.swap(v, order)
            }
            atomic_cas!($t, compare_exchange, compare_exchange_weak);
            /// `get_mut` (exclusive: not recorded).
            #[inline]
            pub fn get_mut(&mut self) -> &mut $t {
                self.0.get_mut()
            }
            /// `into_inner`.
            #[inline]
            pub fn into_inner(self) -> $t {
                self.0.into_inner()
            }
            /// `as_ptr` (not recorded: the caller's accesses through it are its own).
            #[inline]
            pub const fn as_ptr(&self) -> *mut $t {
                self.0.as_ptr()
            }
        }
    };
}

/// The compare-and-swaps `$op` of an atomic holding a `$t` (each a locked write, failed or
/// not: `lock cmpxchg` takes the line either way).
macro_rules! atomic_cas {
    ($t:ty, $($op:ident),+) => {
        $(
            #[doc = concat!("`", stringify!($op), "` (a locked write, failed or not).")]
            #[track_caller]
            #[inline]
            pub fn $op(
                &self,
                current: $t,
                new: $t,
                success: Ordering,
                failure: Ordering,
            ) -> Result<$t, $t> {
                rec(self, true, true, Location::caller());
                self.0.$op(current, new, success, failure)
            }
        )+
    };
}

/// The read-modify-writes `$op` of the integer and bool atomics (each a locked write).
macro_rules! atomic_rmw {
    ($name:ident, $t:ty, $($op:ident),+) => {
        impl $name {
            $(
                #[doc = concat!("`", stringify!($op), "` (a locked write).")]
                #[track_caller]
                #[inline]
                pub fn $op(&self, v: $t, order: Ordering) -> $t {
                    rec(self, true, true, Location::caller());
                    self.0.$op(v, order)
                }
            )+
        }
    };
}

/// An integer atomic: the common methods and every `fetch_*`.
macro_rules! atomic_int {
    ($name:ident, $std:ty, $t:ty) => {
        atomic_common!($name, $std, $t);
        atomic_rmw!(
            $name, $t, fetch_add, fetch_sub, fetch_and, fetch_or, fetch_xor, fetch_max, fetch_min
        );
    };
}

atomic_int!(AtomicU32, std::sync::atomic::AtomicU32, u32);
atomic_int!(AtomicU64, std::sync::atomic::AtomicU64, u64);
atomic_int!(AtomicUsize, std::sync::atomic::AtomicUsize, usize);
atomic_int!(AtomicI32, std::sync::atomic::AtomicI32, i32);
atomic_int!(AtomicI64, std::sync::atomic::AtomicI64, i64);
atomic_common!(AtomicBool, std::sync::atomic::AtomicBool, bool);
atomic_rmw!(AtomicBool, bool, fetch_and, fetch_or, fetch_xor);
atomic_common!(AtomicPtr<T>, std::sync::atomic::AtomicPtr<T>, *mut T);

/// Records a locked write of the lock word at `addr`, taking (`op` [`LockOp::Lock`]) or
/// releasing it, if in a window.
#[inline]
fn rec_lock(addr: usize, at: &'static Location<'static>, op: LockOp) {
    rec_op(addr as *const u8, true, true, at, Some(op));
}

/// A lock's guard `G` (std's or parking_lot's) whose drop records the unlock, a locked
/// write of the lock word, at the line that took the lock.
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct Guard<G> {
    g: G,
    lock: usize,
    at: &'static Location<'static>,
}

impl<G> Guard<G> {
    /// Records the acquisition of the lock at `lock` (made at `at`) and wraps its guard.
    fn taken<L: ?Sized>(
        lock: &L,
        at: &'static Location<'static>,
        take: impl FnOnce() -> G,
    ) -> Self {
        let lock = lock as *const L as *const u8 as usize;
        rec_lock(lock, at, LockOp::Lock);
        Guard {
            g: take(),
            lock,
            at,
        }
    }

    /// [`taken`](Self::taken) for std's poisoning locks.
    fn taken_std<L: ?Sized>(
        lock: &L,
        at: &'static Location<'static>,
        take: impl FnOnce() -> LockResult<G>,
    ) -> LockResult<Self> {
        let mut poisoned = false;
        let g = Guard::taken(lock, at, || {
            take().unwrap_or_else(|p| {
                poisoned = true;
                p.into_inner()
            })
        });
        if poisoned {
            Err(PoisonError::new(g))
        } else {
            Ok(g)
        }
    }
}

impl<G: std::ops::Deref> std::ops::Deref for Guard<G> {
    type Target = G::Target;
    fn deref(&self) -> &G::Target {
        &self.g
    }
}

impl<G: std::ops::DerefMut> std::ops::DerefMut for Guard<G> {
    fn deref_mut(&mut self) -> &mut G::Target {
        &mut self.g
    }
}

impl<G> Drop for Guard<G> {
    fn drop(&mut self) {
        rec_lock(self.lock, self.at, LockOp::Unlock);
    }
}

impl<G: std::ops::Deref<Target: std::fmt::Debug>> std::fmt::Debug for Guard<G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (*self.g).fmt(f)
    }
}

/// [`Mutex`]'s guard.
pub type MutexGuard<'a, T> = Guard<std::sync::MutexGuard<'a, T>>;
/// [`RwLock`]'s read guard.
pub type RwLockReadGuard<'a, T> = Guard<std::sync::RwLockReadGuard<'a, T>>;
/// [`RwLock`]'s write guard.
pub type RwLockWriteGuard<'a, T> = Guard<std::sync::RwLockWriteGuard<'a, T>>;
/// [`PlMutex`]'s guard.
pub type PlMutexGuard<'a, T> = Guard<parking_lot::MutexGuard<'a, T>>;

/// Defines a lock wrapper `$name` over `$inner`: `new`, `get_mut`, `Default`, `Debug`.
macro_rules! lock_wrapper {
    ($(#[$doc:meta])* $name:ident, $inner:ident :: $lock:ident, $get_mut:ty) => {
        $(#[$doc])*
        ///
        /// `#[repr(transparent)]`: the lock itself, so its address (the line recorded) is
        /// the wrapped lock word's.
        #[derive(Default)]
        #[repr(transparent)]
        pub struct $name<T: ?Sized>($inner::$lock<T>);

        impl<T: ?Sized + std::fmt::Debug> std::fmt::Debug for $name<T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }

        impl<T> $name<T> {
            /// A new unlocked lock holding `v`.
            pub const fn new(v: T) -> Self {
                Self($inner::$lock::new(v))
            }
        }

        impl<T: ?Sized> $name<T> {
            /// `get_mut` (exclusive: not recorded).
            pub fn get_mut(&mut self) -> $get_mut {
                self.0.get_mut()
            }
        }
    };
}

use std::sync as std_sync;

lock_wrapper!(
    /// `std::sync::Mutex` that records the lock word's writes: `lock` a `lock cmpxchg`,
    /// the guard's drop an `xchg`.
    Mutex, std_sync::Mutex, LockResult<&mut T>
);
lock_wrapper!(
    /// `std::sync::RwLock` that records the lock word's writes (a reader writes it too).
    RwLock, std_sync::RwLock, LockResult<&mut T>
);
lock_wrapper!(
    /// `parking_lot::Mutex` (the directory lock, dcache.rs) that records the lock word's
    /// writes: `lock` and the unlock are each a `lock cmpxchg` (parking_lot's fast paths).
    PlMutex, parking_lot::Mutex, &mut T
);

impl<T: ?Sized> Mutex<T> {
    /// `lock` (a locked write of the lock word; the guard's drop another).
    #[track_caller]
    pub fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
        Guard::taken_std(self, Location::caller(), || self.0.lock())
    }
}

impl<T> Mutex<T> {
    /// `into_inner`.
    pub fn into_inner(self) -> LockResult<T> {
        self.0.into_inner()
    }
}

impl<T: ?Sized> RwLock<T> {
    /// `read` (a locked write of the lock word; the guard's drop another).
    #[track_caller]
    pub fn read(&self) -> LockResult<RwLockReadGuard<'_, T>> {
        Guard::taken_std(self, Location::caller(), || self.0.read())
    }
    /// `write` (a locked write of the lock word; the guard's drop another).
    #[track_caller]
    pub fn write(&self) -> LockResult<RwLockWriteGuard<'_, T>> {
        Guard::taken_std(self, Location::caller(), || self.0.write())
    }
}

impl<T: ?Sized> PlMutex<T> {
    /// `lock` (a locked write of the lock word; the guard's drop another).
    #[track_caller]
    pub fn lock(&self) -> PlMutexGuard<'_, T> {
        Guard::taken(self, Location::caller(), || self.0.lock())
    }
}

/// Records a read (`write == false`) or write of `p`'s line, for the memory `sync`'s
/// wrappers cannot see by themselves (an `UnsafeCell`'s contents, an epoch `Atomic`).
#[track_caller]
#[inline]
pub(crate) fn touch<T: ?Sized>(p: *const T, write: bool, locked: bool) {
    rec(p, write, locked, Location::caller());
}

/// Where an access was made, for a report: the innermost frames of uvfs outside `sync/`
/// (the function that used the atomic or lock, not the wrapper or the primitive built on
/// it), as `file:line function`, innermost first, at most `callers + 1` of them; the
/// wrapper's caller (`at`) if the stack has no such frame (no debug information).
/// Symbols are resolved once per address (the cache is the calling thread's).
pub fn describe(a: &Access, callers: usize) -> Vec<String> {
    thread_local! {
        static CACHE: RefCell<std::collections::HashMap<usize, Vec<(String, String)>>> =
            RefCell::new(std::collections::HashMap::new());
    }
    let mut out: Vec<String> = Vec::new();
    for &ip in a.stack.iter() {
        let frames = CACHE.with(|c| {
            c.borrow_mut()
                .entry(ip)
                .or_insert_with(|| {
                    // (file:line, function) of each frame at `ip`, inlined ones first.
                    let mut v = Vec::new();
                    // A return address: the call is the byte before it.
                    backtrace::resolve(ip.saturating_sub(1) as *mut std::ffi::c_void, |s| {
                        let file = s.filename().map(|f| f.display().to_string());
                        let name = s.name().map(|n| format!("{n:#}")).unwrap_or_default();
                        if let (Some(file), Some(line)) = (file, s.lineno()) {
                            v.push((format!("{file}:{line}"), name));
                        }
                    });
                    v
                })
                .clone()
        });
        for (site, name) in frames {
            let Some(rel) = site.find("crates/uvfs/src/").map(|i| &site[i + 16..]) else {
                continue;
            };
            if rel.starts_with("sync/") {
                continue;
            }
            let short = name.rsplit("::").take(2).collect::<Vec<_>>();
            let short = short.into_iter().rev().collect::<Vec<_>>().join("::");
            let entry = format!("{rel} {short}");
            if out.last() != Some(&entry) {
                out.push(entry);
            }
            if out.len() > callers {
                return out;
            }
        }
    }
    if out.is_empty() {
        out.push(format!("{}:{}", a.at.file(), a.at.line()));
    }
    out
}
