//! Reads racing writes, truncates and hole punches on one tmpfs file (issue 16: reads
//! without the data lock, validated by the file's sequence count).
//!
//! Linux's `read(2)` on tmpfs is not atomic against a concurrent `write(2)` in general,
//! but uvfs promises more, as under its data lock: a read sees each write, truncate or
//! punch whole or not at all (`fs/tmpfs/regular.rs`, `read_at`). So every read here must
//! return one of the file's states: the old or the new contents of a write, zeros past a
//! truncate point that was extended again, a short count (or 0) after a shrink, never bytes
//! of two writes or garbage. Both paths are exercised: reads of up to 16 pages take the
//! lockless path, longer ones the data lock. Fixed iteration counts; nothing is timed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use uvfs::*;

const PAGE: usize = 4096;

/// A tmpfs task with `/f` open read-write as fd 0 (`len` bytes of `fill`).
fn file(len: usize, fill: u8) -> Task {
    let mnt = tmpfs::mount(TmpfsOptions::default());
    let t = Task::init(&mnt);
    let fd = t
        .open("/f", OpenFlags::RDWR | OpenFlags::CREAT, 0o644)
        .unwrap();
    assert_eq!(fd, Fd(0));
    assert_eq!(t.pwrite(fd, &vec![fill; len], 0), Ok(len));
    t
}

/// Runs `writer` on a thread of `t` (a `clone_thread`: one shared descriptor table, as the
/// bench's read-shared) while `readers` threads call `reader` until the writer is done;
/// returns how many reads the readers made.
fn race(
    t: &Task,
    readers: usize,
    writer: impl FnOnce(&Task) + Send + 'static,
    reader: impl Fn(&Task) + Send + Sync + 'static,
) -> u64 {
    let done = Arc::new(AtomicBool::new(false));
    let reader = Arc::new(reader);
    let rs: Vec<_> = (0..readers)
        .map(|_| {
            let (t, done, reader) = (t.clone_thread(), done.clone(), reader.clone());
            thread::spawn(move || {
                let mut n = 0u64;
                // Relaxed: a stop flag; the join orders everything else.
                while !done.load(Ordering::Relaxed) {
                    reader(&t);
                    n += 1;
                }
                // At least one read after the writer's last change.
                reader(&t);
                n + 1
            })
        })
        .collect();
    let w = t.clone_thread();
    let d = done.clone();
    thread::spawn(move || {
        writer(&w);
        // Relaxed: see the readers' load.
        d.store(true, Ordering::Relaxed);
    })
    .join()
    .unwrap();
    rs.into_iter().map(|h| h.join().unwrap()).sum()
}

/// Whole-file writes of one byte value each, read whole and at an unaligned offset: every
/// read returns every byte equal (one write's contents), never a mix of two writes.
fn writes_are_seen_whole(pages: usize) {
    let len = pages * PAGE;
    let t = file(len, 1);
    let reads = race(
        &t,
        2,
        move |w| {
            for k in 0..3000u32 {
                let b = (k % 250) as u8 + 2;
                assert_eq!(w.pwrite(Fd(0), &vec![b; len], 0), Ok(len));
            }
        },
        move |r| {
            let mut buf = vec![0u8; len];
            for off in [0, 1000] {
                let n = r.pread(Fd(0), &mut buf, off as i64).unwrap();
                assert_eq!(n, len - off, "size never changes");
                let first = buf[0];
                assert!(first >= 1, "a byte no write stored: {first}");
                if let Some(i) = buf[..n].iter().position(|&x| x != first) {
                    panic!("mixed write: byte {i} is {} after {first}s", buf[i]);
                }
            }
        },
    );
    assert!(reads > 0);
}

/// Lockless path (3 pages).
#[test]
fn read_vs_write_short() {
    writes_are_seen_whole(3);
}

/// Locked path (20 pages, past the lockless limit).
#[test]
fn read_vs_write_long() {
    writes_are_seen_whole(20);
}

/// Write 2 pages of `b`, shrink to 5000 bytes, extend to 8192: a read of 8 KiB at 0 sees
/// 8192 bytes of `b`, or 5000 of `b`, or 5000 of `b` then zeros (Linux: the truncated
/// tail of the partial page is zeroed, `truncate_pagecache`), or, after `ftruncate(0)`,
/// nothing; never bytes of two values or stale bytes past a truncate.
#[test]
fn read_vs_truncate() {
    let t = file(0, 0);
    let reads = race(
        &t,
        2,
        |w| {
            for k in 0..3000u32 {
                let b = (k % 250) as u8 + 1;
                assert_eq!(w.pwrite(Fd(0), &[b; 2 * PAGE], 0), Ok(2 * PAGE));
                w.ftruncate(Fd(0), 5000).unwrap();
                w.ftruncate(Fd(0), 2 * PAGE as i64).unwrap();
                w.ftruncate(Fd(0), 0).unwrap();
            }
        },
        |r| {
            let mut buf = [0u8; 2 * PAGE];
            let n = r.pread(Fd(0), &mut buf, 0).unwrap();
            if n == 0 {
                return;
            }
            let b = buf[0];
            assert!(b >= 1, "the first byte is never a hole's");
            let data = buf[..n].iter().take_while(|&&x| x == b).count();
            match (n, data) {
                (8192, 8192) | (5000, 5000) | (8192, 5000) => {}
                _ => panic!("read {n} bytes, {data} of {b} first: not a state of the file"),
            }
            assert!(
                buf[data..n].iter().all(|&x| x == 0),
                "after {data} bytes of {b}, something other than zeros"
            );
        },
    );
    assert!(reads > 0);
}

/// Punching the middle page of 3 and writing it again: a read sees it as data or as
/// zeros, whole (the partial-page zeroing at the punch's ends included).
#[test]
fn read_vs_punch_hole() {
    let t = file(3 * PAGE, 7);
    let reads = race(
        &t,
        2,
        |w| {
            for _ in 0..3000 {
                // Punch [PAGE - 100, 2 * PAGE + 100): partial ends and one whole page.
                w.fallocate(Fd(0), 0x02 | 0x01, PAGE as i64 - 100, PAGE as i64 + 200)
                    .unwrap();
                assert_eq!(
                    w.pwrite(Fd(0), &[7; PAGE + 200], PAGE as i64 - 100),
                    Ok(PAGE + 200)
                );
            }
        },
        |r| {
            let mut buf = [0u8; 3 * PAGE];
            assert_eq!(r.pread(Fd(0), &mut buf, 0), Ok(3 * PAGE));
            let (lo, hi) = (PAGE - 100, 2 * PAGE + 100);
            assert!(
                buf[..lo].iter().chain(&buf[hi..]).all(|&x| x == 7),
                "outside the hole"
            );
            let v = buf[lo];
            assert!(v == 0 || v == 7);
            assert!(buf[lo..hi].iter().all(|&x| x == v), "a punch seen in part");
        },
    );
    assert!(reads > 0);
}
