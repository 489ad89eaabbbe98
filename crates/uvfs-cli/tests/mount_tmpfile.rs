//! `O_TMPFILE` on `uvfs mount`: the kernel sends `FUSE_TMPFILE` (Linux 6.1+), the server
//! creates and opens an unnamed file in one request; what a program sees must be what a
//! kernel tmpfs gives: an unnamed regular file with no links and no directory entry, which
//! `linkat(AT_EMPTY_PATH)` names unless it was opened `O_EXCL`, and the open's errors.
//!
//! Before: the server answered TMPFILE `ENOSYS`, so every `O_TMPFILE` open on the mount
//! failed `EOPNOTSUPP` (fuser 0.18, which served the mount then, has no `tmpfile`).

mod common;

use std::fs;
use std::path::Path;

use common::same_as_host_tmpfs;
use rustix::fs::{AtFlags, Mode, OFlags, CWD};
use rustix::io::{pread, write};

/// What a program observes of `O_TMPFILE` in `dir`, one line per step.
fn script(dir: &Path) -> Vec<String> {
    let mut out = vec![];
    let tmp =
        |flags: OFlags| rustix::fs::open(dir, OFlags::TMPFILE | flags, Mode::from_raw_mode(0o640));
    let fd = tmp(OFlags::RDWR).unwrap();
    let st = rustix::fs::fstat(&fd).unwrap();
    out.push(format!(
        "open: nlink {}, mode {:o}, size {}",
        st.st_nlink, st.st_mode, st.st_size
    ));
    write(&fd, b"unnamed data").unwrap();
    let names: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    out.push(format!("entries while unnamed: {names:?}"));
    let mut buf = [0u8; 12];
    let n = pread(&fd, &mut buf, 0).unwrap();
    out.push(format!("pread: {:?}", String::from_utf8_lossy(&buf[..n])));
    let linked = rustix::fs::linkat(&fd, "", CWD, dir.join("named"), AtFlags::EMPTY_PATH);
    out.push(format!("linkat: {linked:?}"));
    out.push(format!(
        "named: {:?}, nlink {}",
        fs::read_to_string(dir.join("named")),
        rustix::fs::fstat(&fd).unwrap().st_nlink
    ));
    drop(fd);

    let excl = tmp(OFlags::WRONLY | OFlags::EXCL).unwrap();
    let linked = rustix::fs::linkat(&excl, "", CWD, dir.join("never"), AtFlags::EMPTY_PATH);
    out.push(format!("O_EXCL linkat: {linked:?}"));
    drop(excl);

    out.push(format!("O_RDONLY: {:?}", tmp(OFlags::RDONLY).err()));
    let on_file = rustix::fs::open(
        dir.join("named"),
        OFlags::TMPFILE | OFlags::RDWR,
        Mode::from_raw_mode(0o600),
    );
    out.push(format!("on a file: {:?}", on_file.err()));
    let names: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    out.push(format!("entries at the end: {names:?}"));
    out
}

#[test]
fn o_tmpfile_as_on_tmpfs() {
    same_as_host_tmpfs("o_tmpfile_as_on_tmpfs", &[], script);
}
