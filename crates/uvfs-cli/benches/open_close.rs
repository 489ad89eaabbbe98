//! Lesson 4: open and close of files no other thread touches must write no global line.
//!
//! Seed patch: "cacheline align files_lock" (2003: the global list of open files and its
//! lock got their own cache line, away from `max_files`, which every open reads), and then
//! Linux 3.13 removed the list altogether. uvfs keeps no list of open files
//! (`NoFileList`); the lesson's befores keep one global list under one lock, with the lock
//! on the line of `max_files` (`GlobalFileListVariant`, 2003 before the patch) or on its own
//! line (`AlignedFileListVariant`, the patch).
//!
//! Measured: `close(open("/f<i>", O_RDONLY))` per iteration, each thread its own forked task
//! (its own fd table) opening its own pre-created file, so threads share only the root
//! directory they look the name up in (a lockless read) and, in the list variants, the
//! global list and its lock (written twice per iteration).
//!
//! Reading the result: divan prints the time per open+close (fastest, slowest, median, mean)
//! per variant and thread count, each thread's samples counted separately. Compare the
//! medians of the variants at the SAME thread count, as ratios to `Uvfs`: at 1 thread the
//! list variants add two uncontended lock round trips; at 2 threads the lock's line (and,
//! unaligned, `max_files`'s with it) moves between the cores. On a 2-vCPU shared VM absolute
//! times move between runs; read the ratio within one run, and rerun before trusting a small
//! difference.

mod common;

use common::PerThread;
use divan::Bencher;
use std::sync::Mutex;
use uvfs::variant::{AlignedFileListVariant, GlobalFileListVariant, Uvfs, Variant};
use uvfs::{tmpfs, OpenFlags, Task, TmpfsOptions};

fn main() {
    divan::main();
}

#[divan::bench(
    types = [Uvfs, AlignedFileListVariant, GlobalFileListVariant],
    threads = [1, 2],
    sample_count = 100,
    sample_size = 20_000,
    max_time = 3,
)]
fn open_close<V: Variant>(bencher: Bencher) {
    let mnt = tmpfs::mount(TmpfsOptions::default());
    // The parent and the number of files made so far.
    let parent = Mutex::new((Task::<V>::init_variant(&mnt), 0usize));
    let threads = PerThread::new(|| {
        let mut parent = parent.lock().unwrap();
        let name = format!("/f{}", parent.1);
        parent.1 += 1;
        let fd = parent
            .0
            .open(&name, OpenFlags::CREAT | OpenFlags::RDWR, 0o644)
            .unwrap();
        parent.0.close(fd).unwrap();
        let task = parent.0.fork();
        let fd = task.open(&name, OpenFlags::RDONLY, 0).unwrap();
        task.close(fd).unwrap();
        (task, name.into_bytes())
    });
    bencher
        .with_inputs(|| threads.get())
        .bench_refs(|t| t.0.close(t.0.open(&t.1, OpenFlags::RDONLY, 0)?));
}
