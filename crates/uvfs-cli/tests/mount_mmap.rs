//! Shared writable `mmap` on `uvfs mount` past `--size`: the error must reach the program,
//! at the latest when it closes the file.
//!
//! Bug (issue 15 item 7): 96 MiB of stores through a shared mapping on a 64 MiB mount,
//! `munmap`, then `close` returned 0 and 32 MiB were gone (a kernel tmpfs raises SIGBUS at
//! the store). Cause: FUSE writes dirty mapped pages back later (the kernel's flusher, or
//! `fuse_flush` at close); the WRITEs past the limit failed with ENOSPC, which the kernel
//! records on the file's mapping (`mapping_set_error` in `fuse_writepage_end`), but every
//! file was opened with `FOPEN_NOFLUSH`, so `close` neither wrote the dirty pages back nor
//! looked at that error (`fuse_flush` returns 0 first). And a writeback WRITE only partly
//! stored got a short count, which the kernel's writeback ignores (it looks at the error
//! alone). Fix: files opened `O_RDWR` (the only ones a shared writable mapping can be made
//! of) are opened without `FOPEN_NOFLUSH`, so `close` writes the dirty pages back and
//! returns their error; the first `FLUSH` is answered `ENOSYS`, so later closes make no
//! round trip (the kernel then sets `no_flush`); a writeback WRITE is stored whole or
//! answered with the error.

mod common;

use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::fd::IntoRawFd;
use std::path::Path;

use common::{uvfs_only, MountGuard};
use rustix::mm::{madvise, mmap, msync, munmap, Advice, MapFlags, MsyncFlags, ProtFlags};

const MIB: usize = 1 << 20;

/// Whether `e` is ENOSPC.
fn enospc(e: &rustix::io::Errno) -> bool {
    *e == rustix::io::Errno::NOSPC
}

/// Maps `len` bytes of `path` (made that long, sparse) shared and writable, fills them with
/// `byte` through the mapping, then `msync`s if `sync` and unmaps. Returns the descriptor
/// (still open) and `msync`'s result.
fn store_through_mapping(
    path: &Path,
    len: usize,
    byte: u8,
    sync: bool,
) -> (i32, rustix::io::Result<()>) {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .unwrap();
    f.set_len(len as u64).unwrap();
    // SAFETY: a fresh mapping of `len` bytes of a file this test alone uses, touched only
    // through the slice below, which ends before `munmap`.
    let p = unsafe {
        mmap(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
            &f,
            0,
        )
    }
    .expect("mmap");
    // Not inherited by a fork (`MADV_DONTFORK`): another test's `uvfs mount` is spawned
    // with `pre_exec`, so by `fork` from this process; the child's copy of a shared
    // mapping of a FUSE file is torn down at its `exec`, and the kernel's `fuse_vma_close`
    // then writes the pages back and takes their error off the mapping
    // (`write_inode_now`'s `filemap_check_errors`) until it sets it again: a `close` here
    // in between found no error and returned 0 (traced: the ENOSPC reply, the child's
    // re-set, then our FLUSH). A Linux race on the legacy AS_ENOSPC flag, not the
    // server's; `msync` (the errseq check) does not see it. docs/mount.md says so.
    // SAFETY: `p`, `len` are the mapping just made; the advice changes only fork's copy.
    unsafe { madvise(p, len, Advice::LinuxDontFork) }.expect("madvise");
    {
        // SAFETY: `p` maps `len` bytes, readable and writable, for as long as this slice.
        let s = unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), len) };
        s.fill(byte);
    }
    let synced = if sync {
        // SAFETY: `p`, `len` are the mapping made above.
        unsafe { msync(p, len, MsyncFlags::SYNC) }
    } else {
        Ok(())
    };
    // SAFETY: as above; nothing refers to the mapping any more.
    unsafe { munmap(p, len) }.expect("munmap");
    (f.into_raw_fd(), synced)
}

/// `close(2)` of `fd`, with its result.
fn close(fd: i32) -> rustix::io::Result<()> {
    // SAFETY: `fd` is a descriptor this test owns and uses no more.
    unsafe { rustix::io::try_close(fd) }
}

#[test]
fn mmap_stores_past_size_fail_at_close() {
    let test = "mmap_stores_past_size_fail_at_close";
    if !uvfs_only(test) {
        return;
    }
    let Some(mnt) = MountGuard::mount(test, &["--size", "16m"]) else {
        return;
    };
    let path = mnt.path().join("big");
    // 24 MiB of stores on a 16 MiB mount, no msync, munmap, close.
    let (fd, _) = store_through_mapping(&path, 24 * MIB, 0x5a, false);
    let closed = close(fd);
    assert!(
        closed.as_ref().is_err_and(enospc),
        "close after 24 MiB of mmap stores on a 16 MiB mount: {closed:?}, want ENOSPC"
    );
    // What did fit is stored; the error was reported once.
    let mut back = Vec::new();
    File::open(&path).unwrap().read_to_end(&mut back).unwrap();
    assert_eq!(back.len(), 24 * MIB, "the size set");
    let stored = back.iter().filter(|&&b| b == 0x5a).count();
    assert!(
        stored > 0 && stored <= 16 * MIB,
        "{stored} bytes stored on a 16 MiB mount"
    );
    fs::remove_file(&path).unwrap();

    // With msync, msync reports it (and close has nothing left to report).
    let (fd, synced) = store_through_mapping(&path, 24 * MIB, 0x6b, true);
    let closed = close(fd);
    assert!(
        synced.as_ref().is_err_and(enospc),
        "msync after 24 MiB of stores on a 16 MiB mount: {synced:?}, want ENOSPC"
    );
    assert_eq!(closed, Ok(()), "close after msync reported the error");
    fs::remove_file(&path).unwrap();

    // Within the limit: close returns 0 and every byte is there.
    let (fd, _) = store_through_mapping(&path, 8 * MIB, 0x7c, false);
    assert_eq!(
        close(fd),
        Ok(()),
        "close after 8 MiB of stores on a 16 MiB mount"
    );
    let mut back = Vec::new();
    File::open(&path).unwrap().read_to_end(&mut back).unwrap();
    assert!(back.len() == 8 * MIB && back.iter().all(|&b| b == 0x7c));
    mnt.unmount();
}

/// A writeback WRITE that only partly fits: on a mount of 1 MiB + 4 KiB, 1 MiB + 64 KiB of
/// stores; the WRITE that carries the pages past 1 MiB stores one page and is short, which
/// the kernel's writeback does not check (it reads the error alone): without the error the
/// other 60 KiB were dropped and close returned 0.
#[test]
fn mmap_writeback_partly_past_size_fails_at_close() {
    let test = "mmap_writeback_partly_past_size_fails_at_close";
    if !uvfs_only(test) {
        return;
    }
    let size = (MIB + 4096).to_string();
    let Some(mnt) = MountGuard::mount(test, &["--size", &size]) else {
        return;
    };
    let path = mnt.path().join("f");
    let (fd, _) = store_through_mapping(&path, MIB + 64 * 1024, 0x11, false);
    let closed = close(fd);
    assert!(
        closed.as_ref().is_err_and(enospc),
        "close after 1 MiB + 64 KiB of stores on a 1 MiB + 4 KiB mount: {closed:?}, want ENOSPC"
    );
    mnt.unmount();
}
