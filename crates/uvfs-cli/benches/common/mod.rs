//! What the microbenchmarks share: one value per benchmark thread, for divan's `threads`
//! option, on a CPU of its own.
//!
//! divan runs a bench closure on N threads at once and needs it `Sync`, but a `Task` is
//! `!Sync` (`Send` only): every thread needs its own, made on that thread's first use. The
//! closure cannot name a `thread_local!` of a generic `Task<V>`, so [`PerThread`] keeps the
//! value type-erased in one thread-local slot, keyed by the run (one call of a bench
//! function, so one variant and one thread count). divan calls an input generator on the
//! thread whose sample loop uses the input (`Bencher::with_inputs`), outside the timed
//! section; so the lookup is not timed: the timed closure gets an `Rc` to its thread's value
//! and only dereferences it.
//!
//! On its first use in a run a thread is also pinned to a CPU of its own (the run's first
//! thread to the first CPU the process may use, the second to the second, ...). Without it
//! the threads of a sample often do not run at the same time: divan starts each sample at a
//! barrier, the scheduler wakes the waiting thread on the CPU of the thread that woke it
//! (wake-affine), that thread runs its whole sample (milliseconds) first, and a 2-thread
//! run measures no contention at all (seen on the 2-vCPU VM: `file_ref_get` at 2 threads
//! as fast as at 1, in some samples or all). Pinned, a thread whose CPU another process
//! takes is slowed down, which shows as slow samples rather than as a false scaling.
//!
//! Every bench binary includes this module, and with it the allocator of the `uvfs` binary
//! (src/main.rs, which says why): under glibc's malloc, frees of memory another thread
//! allocated (epoch-deferred frees of closed files) serialise on an arena lock, which
//! topped a profile of `open_close` at 2 threads, in every variant.
//!
//! A thread keeps its value until its next run replaces it (or the process exits): divan's
//! worker threads outlive a run, and nothing in a run can reach their thread-locals.

use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

thread_local! {
    /// This thread's value for the run it last served: `(run id, value)`.
    static SLOT: RefCell<Option<(u64, Rc<dyn Any>)>> = const { RefCell::new(None) };
}

/// Run ids, never reused, so a stale value of an earlier run is never taken for this one.
static NEXT_RUN: AtomicU64 = AtomicU64::new(1);

/// The CPUs the process may run on, as it started (before any thread was pinned; threads
/// divan spawns later inherit the mask of the thread that spawns them).
fn cpus() -> &'static [usize] {
    static CPUS: OnceLock<Vec<usize>> = OnceLock::new();
    CPUS.get_or_init(|| match sched_getaffinity(None) {
        Ok(set) => (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect(),
        Err(_) => Vec::new(),
    })
}

/// Pins the calling thread to `cpus()[k % len]`; best effort (a failure leaves it unpinned).
fn pin(k: usize) {
    let cpus = cpus();
    if let Some(&cpu) = cpus.get(k % cpus.len().max(1)) {
        let mut set = CpuSet::new();
        set.set(cpu);
        let _ = sched_setaffinity(None, &set);
    }
}

/// A value of type `T` per benchmark thread, made by `make` on that thread.
pub struct PerThread<F> {
    run: u64,
    /// Threads that joined this run so far: the next one's CPU index.
    joined: AtomicUsize,
    make: F,
}

impl<T: 'static, F: Fn() -> T + Sync> PerThread<F> {
    /// A new run; `make` is called once on each thread that asks for its value. Call it
    /// before the benchmark threads start (in the bench function).
    pub fn new(make: F) -> Self {
        cpus();
        // Relaxed: only uniqueness of the id matters; it orders nothing.
        let run = NEXT_RUN.fetch_add(1, Ordering::Relaxed);
        PerThread {
            run,
            joined: AtomicUsize::new(0),
            make,
        }
    }

    /// This thread's value, made (and the thread pinned) on its first call in this run.
    pub fn get(&self) -> Rc<T> {
        SLOT.with(|slot| {
            let mut slot = slot.borrow_mut();
            if let Some((run, v)) = slot.as_ref() {
                if *run == self.run {
                    return Rc::clone(v).downcast::<T>().expect("one type per run");
                }
            }
            // Drop the previous run's value before making this one (its task may hold
            // files of another mount or variant).
            *slot = None;
            // Relaxed: only distinct indices matter; it orders nothing.
            pin(self.joined.fetch_add(1, Ordering::Relaxed));
            let v = Rc::new((self.make)());
            *slot = Some((self.run, Rc::clone(&v) as Rc<dyn Any>));
            v
        })
    }
}
