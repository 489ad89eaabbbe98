//! `statx` birth time on `uvfs mount`: Linux 6.6+ sends `FUSE_STATX` for a `statx` that
//! asks for `STATX_BTIME` and reports the birth time only if the server's reply has it.
//! What a program sees must be what a kernel tmpfs gives: the bit in `stx_mask`, a birth
//! time no later than the first change time, and one that explicit times, writes and
//! renames leave alone.
//!
//! Before: the server answered STATX `ENOSYS`, so the mount never had a birth time
//! (`stat -c %w` printed `-`).

mod common;

use std::fs;
use std::path::Path;

use common::same_as_host_tmpfs;
use rustix::fs::{statx, AtFlags, StatxFlags, Timestamps, CWD};

/// What a program observes of the birth time of a file, a directory and a device node in
/// `dir`, one line per step.
fn script(dir: &Path) -> Vec<String> {
    let mut out = vec![];
    let f = dir.join("f");
    fs::write(&f, "x").unwrap();
    fs::create_dir(dir.join("d")).unwrap();
    rustix::fs::mknodat(
        CWD,
        dir.join("null"),
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o600),
        rustix::fs::makedev(1, 3),
    )
    .unwrap();
    let sx = |p: &Path, mask: StatxFlags| statx(CWD, p, AtFlags::SYMLINK_NOFOLLOW, mask).unwrap();
    for name in ["f", "d", "null"] {
        let x = sx(&dir.join(name), StatxFlags::BTIME | StatxFlags::CTIME);
        let bt = (x.stx_btime.tv_sec, x.stx_btime.tv_nsec);
        let ct = (x.stx_ctime.tv_sec, x.stx_ctime.tv_nsec);
        out.push(format!(
            "{name}: btime in mask {}, set {}, not after ctime {}",
            x.stx_mask & StatxFlags::BTIME.bits() != 0,
            bt != (0, 0),
            bt <= ct
        ));
    }
    let before = sx(&f, StatxFlags::BTIME).stx_btime;
    let old = rustix::fs::Timespec {
        tv_sec: 978_307_200,
        tv_nsec: 0,
    };
    let times = Timestamps {
        last_access: old,
        last_modification: old,
    };
    rustix::fs::utimensat(CWD, &f, &times, AtFlags::empty()).unwrap();
    fs::write(&f, "more").unwrap();
    fs::rename(&f, dir.join("g")).unwrap();
    let after = sx(&dir.join("g"), StatxFlags::BTIME).stx_btime;
    out.push(format!(
        "btime kept by utimensat, write, rename: {}",
        (before.tv_sec, before.tv_nsec) == (after.tv_sec, after.tv_nsec)
    ));
    let basic = sx(&dir.join("g"), StatxFlags::BASIC_STATS);
    out.push(format!(
        "not asked: btime in mask {}",
        basic.stx_mask & StatxFlags::BTIME.bits() != 0
    ));
    out
}

#[test]
fn statx_btime_as_on_tmpfs() {
    same_as_host_tmpfs("statx_btime_as_on_tmpfs", &[], script);
}
