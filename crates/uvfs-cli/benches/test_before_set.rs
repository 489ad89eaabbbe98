//! Lesson 3: `stat` of one file from many threads must not write the file's inode.
//!
//! Seed patch: "fs/buffer: avoid setting buffer bits that are already set" (test a sticky
//! bit before a `set_bit`, so that setting an already set bit does not take the line
//! exclusive). In uvfs the sticky bit is the inode's `I_CTIME_QUERIED` mark, set by every
//! `stat` (multigrain timestamps) and cleared only by the next ctime change: uvfs tests it
//! and writes only when it is clear; the lesson's before (`BlindSetVariant`) does a
//! `fetch_or` on every `stat`.
//!
//! Measured: `fstat(fd)` on ONE shared file, whose ctime was queried before timing (the mark
//! is set for the whole run and nothing changes the file). Each thread is its own forked
//! task with its own open of the file (its own fd table, not shared: `fstat` takes no
//! reference), so the only thing threads share is the inode: with uvfs two threads only
//! read it, with `BlindSetVariant` each call writes its timestamp line.
//!
//! Reading the result: divan prints the time per call (fastest, slowest, median, mean) per
//! variant and thread count, each thread's samples counted separately. Compare the medians
//! of `Uvfs` and `BlindSetVariant` at the SAME thread count: at 1 thread the difference is
//! the cost of one uncontended atomic read-modify-write, at 2 threads that of moving the
//! inode's line between the cores on every call. On a 2-vCPU shared VM absolute times move
//! between runs; read the ratio within one run, and rerun before trusting a small difference.

mod common;

use common::PerThread;
use divan::Bencher;
use std::sync::Mutex;
use uvfs::variant::{BlindSetVariant, Uvfs, Variant};
use uvfs::{tmpfs, OpenFlags, Task, TmpfsOptions};

fn main() {
    divan::main();
}

/// 4 KiB: a regular file with some contents (`st_size` is checked once per thread).
const SIZE: usize = 4096;

#[divan::bench(
    types = [Uvfs, BlindSetVariant],
    threads = [1, 2],
    sample_count = 100,
    sample_size = 200_000,
    max_time = 3,
)]
fn test_before_set<V: Variant>(bencher: Bencher) {
    let mnt = tmpfs::mount(TmpfsOptions::default());
    let parent: Task<V> = Task::init_variant(&mnt);
    let fd = parent
        .open("/shared", OpenFlags::CREAT | OpenFlags::RDWR, 0o644)
        .unwrap();
    assert_eq!(parent.write(fd, &[7u8; SIZE]), Ok(SIZE));
    // The last change of the file was the write; this stat marks its ctime queried.
    assert_eq!(parent.fstat(fd).map(|s| s.st_size), Ok(SIZE as i64));
    parent.close(fd).unwrap();
    let parent = Mutex::new(parent);
    let threads = PerThread::new(|| {
        let task = parent.lock().unwrap().fork();
        let fd = task.open("/shared", OpenFlags::RDONLY, 0).unwrap();
        assert_eq!(task.fstat(fd).map(|s| s.st_size), Ok(SIZE as i64));
        (task, fd)
    });
    bencher
        .with_inputs(|| threads.get())
        .bench_refs(|t| t.0.fstat(t.1).map(|s| s.st_size));
}
