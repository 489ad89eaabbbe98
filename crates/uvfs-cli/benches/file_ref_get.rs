//! Lesson 2: taking a reference on an object found by lockless lookup, alone.
//!
//! Seed patch: "fs: Optimized fget to improve performance", today Linux's `file_ref_t`
//! (include/linux/file_ref.h): `file_ref_get` is one `fetch_add`, where the old
//! `atomic_long_inc_not_zero` loads the count and compare-and-swaps `n -> n + 1` until it
//! sticks (and under contention retries, each retry one more round trip of the line).
//!
//! Measured: `get()` then `put()` (the pair `fget`/`fput` does) on ONE count shared by all
//! threads, holding one other reference so it never reaches zero; the count alone on its
//! own 128-byte block. Variants: `FileRef` (uvfs, `uvfs::sync::file_ref`) and `CasRef` (the
//! lesson's before, `uvfs::sync::refcount`), both through the `RefCount` trait the fd table
//! uses.
//!
//! Reading the result: divan prints the time per get+put (fastest, slowest, median, mean)
//! per type and thread count, each thread's samples counted separately. Compare the medians
//! of `FileRef` and `CasRef` at the SAME thread count: at 1 thread both are two uncontended
//! atomic read-modify-writes; at 2 threads `FileRef` pays the line transfers and `CasRef`
//! also its failed compare-and-swaps. On a 2-vCPU shared VM absolute times move between
//! runs; read the ratio within one run, and rerun before trusting a small difference.

mod common;

use common::PerThread;
use divan::Bencher;
use uvfs::sync::file_ref::FileRef;
use uvfs::sync::refcount::{CasRef, RefCount};

fn main() {
    divan::main();
}

/// The count alone in 128 bytes (a line and its prefetch pair), so nothing else the
/// benchmark touches shares it.
#[repr(align(128))]
struct Alone<R>(R);

#[divan::bench(
    types = [FileRef, CasRef],
    threads = [1, 2],
    sample_count = 100,
    sample_size = 500_000,
    max_time = 3,
)]
fn file_ref_get<R: RefCount>(bencher: Bencher) {
    // One reference held for the whole run: `get` always succeeds, `put` never releases.
    let count = Alone(R::new(1));
    // No per-thread state, but each thread on its own CPU (see `common`).
    let threads = PerThread::new(|| ());
    bencher
        .with_inputs(|| threads.get())
        .bench_refs(|_| count.0.get() && !count.0.put());
    assert_eq!(count.0.read(), 1, "every get was matched by a put");
}
