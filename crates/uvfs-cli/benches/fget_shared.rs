//! Lessons 1 and 2: `fstat(fd)` on ONE fd of a fd table shared by all benchmark threads.
//!
//! Seed patches: "fs: Move f_count to a different cacheline with f_mode" (lesson 1: the
//! count on its own line, away from the fields every call reads) and "fs: Optimized fget
//! to improve performance", today `file_ref_t` (lesson 2: one `fetch_add` per get instead
//! of a compare-and-swap "add unless zero" loop).
//!
//! Measured: one `task.fstat(fd)` per iteration, each thread a `clone_thread()` of one
//! parent task (threads of one process, one fd table, like will-it-scale's `fstat` threads
//! and the `fstat-shared` workload of `uvfs bench`). The table is shared, so with Linux's
//! counted `fget` every call takes and drops a reference on the one `File`: the count's line
//! moves between the cores on every call from 2 threads. Variants, each swapping one
//! mechanism:
//! - `CountedFgetVariant`: uvfs with the counted `fget` (count on its own line,
//!   `FileRef`), the reference for lessons 1 and 2;
//! - `SharedLineVariant` (lesson 1 before): the count on the line of `f_mode`, `f_flags` and
//!   the inode pointer, so the reads of those fields miss too;
//! - `CasRefVariant` (lesson 2 before): gets by a compare-and-swap loop, which retries when
//!   the other core changed the count in between;
//! - `Uvfs`: the product, whose `fdget` borrows the file through the task's own borrow
//!   slots (`FdTable::fdget_borrow`): no shared line written at all.
//!
//! Reading the result: divan prints the time per call (fastest, slowest, median, mean) per
//! variant and thread count, each thread's samples counted separately. Compare the medians
//! of the variants at the SAME thread count, as ratios to `CountedFgetVariant`; at 1 thread the variants
//! should be about equal (no contention), the lessons show at 2 threads. On a 2-vCPU shared
//! VM absolute times move between runs; only ratios within one run are worth reading.
//! divan runs the variants one after another (not sample by sample), so rerun before trusting
//! a small difference.

mod common;

use common::PerThread;
use divan::Bencher;
use std::sync::Mutex;
use uvfs::variant::{CasRefVariant, CountedFgetVariant, SharedLineVariant, Uvfs, Variant};
use uvfs::{tmpfs, OpenFlags, Task, TmpfsOptions};

fn main() {
    divan::main();
}

/// 4 KiB: a regular file with some contents (`st_size` is checked once before timing).
const SIZE: usize = 4096;

#[divan::bench(
    types = [CountedFgetVariant, SharedLineVariant, CasRefVariant, Uvfs],
    threads = [1, 2],
    sample_count = 100,
    sample_size = 200_000,
    max_time = 3,
)]
fn fget_shared<V: Variant>(bencher: Bencher) {
    let mnt = tmpfs::mount(TmpfsOptions::default());
    let parent: Task<V> = Task::init_variant(&mnt);
    let fd = parent
        .open("/shared", OpenFlags::CREAT | OpenFlags::RDWR, 0o644)
        .unwrap();
    assert_eq!(parent.write(fd, &[7u8; SIZE]), Ok(SIZE));
    assert_eq!(parent.fstat(fd).map(|s| s.st_size), Ok(SIZE as i64));
    // The parent stays alive for the whole run, so even at 1 thread the table is shared
    // (two tasks hold it) and `fstat` takes a reference, as in a multithreaded process.
    let parent = Mutex::new(parent);
    let threads = PerThread::new(|| parent.lock().unwrap().clone_thread());
    bencher
        .with_inputs(|| threads.get())
        .bench_refs(|task| task.fstat(fd).map(|s| s.st_size));
}
