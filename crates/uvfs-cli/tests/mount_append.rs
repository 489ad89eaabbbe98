//! Writes on `uvfs mount` follow the descriptor's flags as they are at the time of the
//! write (issue 13): `O_APPEND` set or cleared with `fcntl(F_SETFL)` after `open` changes
//! where `write` and `pwrite` go, exactly as on a kernel tmpfs (where `pwrite` on an
//! `O_APPEND` descriptor appends too: pwrite(2), BUGS).
//!
//! Bug: the server wrote through a uvfs descriptor opened with the flags of the `open`
//! and never changed since, so a descriptor whose `O_APPEND` was cleared kept appending,
//! and one given `O_APPEND` later never appended. The kernel sends each WRITE with the
//! file's current flags (`fuse_write_flags`: `f_flags`), which the server now applies.

mod common;

use std::fs;
use std::path::Path;

use common::same_as_host_tmpfs;
use rustix::fs::{Mode, OFlags};
use rustix::io::{pwrite, write};

/// The file's contents after each step of toggling `O_APPEND` under `write` and `pwrite`,
/// in `dir`.
fn script(dir: &Path) -> Vec<String> {
    let p = dir.join("f");
    fs::write(&p, "0123456789").unwrap();
    let mut out = vec![];
    let mut snap = |what: &str| out.push(format!("{what}: {}", fs::read_to_string(&p).unwrap()));
    let setfl = |fd: &rustix::fd::OwnedFd, append: bool| {
        let fl = rustix::fs::fcntl_getfl(fd).unwrap();
        let fl = if append {
            fl | OFlags::APPEND
        } else {
            fl - OFlags::APPEND
        };
        rustix::fs::fcntl_setfl(fd, fl).unwrap();
    };
    // Opened O_APPEND, then cleared: writes land where they are asked to.
    let a = rustix::fs::open(&p, OFlags::WRONLY | OFlags::APPEND, Mode::empty()).unwrap();
    pwrite(&a, b"xx", 0).unwrap();
    snap("O_APPEND pwrite at 0");
    setfl(&a, false);
    pwrite(&a, b"AB", 0).unwrap();
    snap("cleared, pwrite at 0");
    write(&a, b"CD").unwrap();
    snap("cleared, write");
    // Opened without, then given O_APPEND: both append.
    let b = rustix::fs::open(&p, OFlags::WRONLY, Mode::empty()).unwrap();
    setfl(&b, true);
    pwrite(&b, b"EF", 0).unwrap();
    snap("set, pwrite at 0");
    write(&b, b"GH").unwrap();
    snap("set, write");
    // And back.
    setfl(&b, false);
    pwrite(&b, b"IJ", 1).unwrap();
    snap("cleared again, pwrite at 1");
    write(&b, b"KL").unwrap();
    snap("cleared again, write");
    out
}

#[test]
fn writes_follow_the_current_o_append() {
    same_as_host_tmpfs("writes_follow_the_current_o_append", &[], script);
}
