//! The request decoder on byte fixtures as the kernel sends them, its replies read back
//! with the FUSE client's own checks (`abi::parse_message`, `abi::dirents`: what
//! `fuse_dev_do_write` and `fuse_parse_dirfile` accept), on a uvfs tmpfs.

use super::*;
use crate::fuse::server::FuseOptions;
use crate::types::{self, Fd};
use std::sync::Arc;

/// A request: `fuse_in_header` (uid/gid 0) for `opcode` on `nodeid` and the argument bytes.
fn req(unique: u64, opcode: u32, nodeid: u64, args: &[&[u8]]) -> Vec<u8> {
    let body: Vec<u8> = args.concat();
    let h = abi::InHeader {
        len: (std::mem::size_of::<abi::InHeader>() + body.len()) as u32,
        opcode,
        unique,
        nodeid,
        ..Default::default()
    };
    [h.as_bytes(), &body].concat()
}

/// A server on a fresh tmpfs (kernel permission checks, 1 s timeouts).
fn server() -> (Arc<crate::Mount>, UvfsFuse) {
    let mnt = crate::tmpfs::mount(Default::default());
    let fs = UvfsFuse::new(&mnt, FuseOptions::default());
    (mnt, fs)
}

/// Sends `r` and returns the reply's payload or errno, checked as the kernel checks it
/// (length, unique, an error carries nothing).
fn call(fs: &UvfsFuse, r: &[u8]) -> std::result::Result<Vec<u8>, Errno> {
    let mut out = Vec::new();
    assert!(fs.dispatch(r, &mut out), "a reply for opcode {}", r[4]);
    let (h, _) = abi::InHeader::read_from_prefix(r).unwrap();
    match abi::parse_message(&out).expect("a well-formed reply") {
        abi::Message::Reply { unique, result } => {
            assert_eq!(unique, h.unique);
            result.map(<[u8]>::to_vec)
        }
        abi::Message::Notify { .. } => panic!("a notification"),
    }
}

fn name(s: &str) -> Vec<u8> {
    [s.as_bytes(), b"\0"].concat()
}

/// MKDIR `n` (mode 0755) in the root: its entry.
fn mkdir(fs: &UvfsFuse, unique: u64, n: &str) -> abi::EntryOut {
    let mk = abi::MkdirIn {
        mode: 0o755,
        umask: 0,
    };
    entry(
        &call(
            fs,
            &req(unique, op::FUSE_MKDIR, 1, &[mk.as_bytes(), &name(n)]),
        )
        .unwrap(),
    )
}

fn entry(b: &[u8]) -> abi::EntryOut {
    abi::exact(b).expect("a fuse_entry_out")
}

/// `FUSE_OVER_IO_URING` (flags2 bit 9) is taken only by a server made for the rings
/// (`FuseOptions::over_io_uring`, `serve_uring`) and only when the kernel offers it.
#[test]
fn init_takes_io_uring_only_for_the_ring_transport() {
    let mnt = crate::tmpfs::mount(Default::default());
    let ring = UvfsFuse::new(
        &mnt,
        FuseOptions {
            over_io_uring: true,
            ..Default::default()
        },
    );
    let (_m, classic) = server();
    let init = |flags2: u32| abi::InitIn {
        major: 7,
        minor: 45,
        flags: abi::init::FUSE_INIT_EXT as u32,
        flags2,
        ..Default::default()
    };
    let bit = (abi::init::FUSE_OVER_IO_URING >> 32) as u32;
    let reply = |fs: &UvfsFuse, flags2| -> abi::InitOut {
        abi::exact(&call(fs, &req(2, op::FUSE_INIT, 0, &[init(flags2).as_bytes()])).unwrap())
            .unwrap()
    };
    let out = reply(&ring, bit);
    assert_eq!(out.flags2 & bit, bit);
    assert_ne!(out.flags & abi::init::FUSE_INIT_EXT as u32, 0);
    assert_eq!(reply(&ring, 0).flags2 & bit, 0, "not offered: not taken");
    assert_eq!(
        reply(&classic, bit).flags2 & bit,
        0,
        "fuser's path has no rings"
    );
}

#[test]
fn init_takes_the_smaller_minor_and_only_offered_flags() {
    let (_m, fs) = server();
    let init = |major, minor, flags: u32| abi::InitIn {
        major,
        minor,
        max_readahead: 131072,
        flags,
        ..Default::default()
    };
    let all = init(7, 45, !(abi::init::FUSE_INIT_EXT as u32));
    let out: abi::InitOut =
        abi::exact(&call(&fs, &req(2, op::FUSE_INIT, 0, &[all.as_bytes()])).unwrap()).unwrap();
    assert_eq!((out.major, out.minor), (7, 38));
    assert_eq!(out.max_write, MAX_WRITE);
    assert_eq!(out.max_readahead, 131072);
    let want = abi::init::FUSE_ASYNC_READ
        | abi::init::FUSE_ATOMIC_O_TRUNC
        | abi::init::FUSE_DO_READDIRPLUS
        | abi::init::FUSE_MAX_PAGES;
    assert_eq!(u64::from(out.flags) & want, want);
    assert_eq!(out.flags2, 0, "no flags2 without FUSE_INIT_EXT");
    // A kernel offering nothing gets nothing.
    let none: abi::InitOut =
        abi::exact(&call(&fs, &req(4, op::FUSE_INIT, 0, &[init(7, 31, 0).as_bytes()])).unwrap())
            .unwrap();
    assert_eq!((none.minor, none.flags), (31, 0));
    // Too old: EPROTO; a newer major: ours alone, for the kernel to retry with.
    assert_eq!(
        call(&fs, &req(6, op::FUSE_INIT, 0, &[init(7, 22, 0).as_bytes()])),
        Err(Errno::EPROTO)
    );
    let newer: abi::InitOut =
        abi::exact(&call(&fs, &req(8, op::FUSE_INIT, 0, &[init(8, 0, 0).as_bytes()])).unwrap())
            .unwrap();
    assert_eq!((newer.major, newer.flags), (7, 0));
}

#[test]
fn mkdir_lookup_getattr_and_negative_entries() {
    let (mnt, fs) = server();
    let mk = abi::MkdirIn {
        mode: 0o750,
        umask: 0,
    };
    let e = entry(
        &call(
            &fs,
            &req(2, op::FUSE_MKDIR, 1, &[mk.as_bytes(), &name("d")]),
        )
        .unwrap(),
    );
    let t = crate::Task::init(&mnt);
    let st = t
        .fstatat(Fd::AT_FDCWD, "/d", types::AtFlags::empty())
        .unwrap();
    assert_eq!((e.nodeid, e.attr.ino), (st.st_ino, st.st_ino));
    assert_eq!(e.attr.mode, types::S_IFDIR | 0o750);
    assert_eq!((e.entry_valid, e.attr_valid), (1, 1));
    let l = entry(&call(&fs, &req(4, op::FUSE_LOOKUP, 1, &[&name("d")])).unwrap());
    assert_eq!(l.nodeid, e.nodeid);
    // A missing name: a negative entry (node id 0) cached for the timeout, not ENOENT.
    let neg = entry(&call(&fs, &req(6, op::FUSE_LOOKUP, 1, &[&name("nope")])).unwrap());
    assert_eq!((neg.nodeid, neg.entry_valid), (0, 1));
    // In the new directory, by its node id; an unknown node id is ESTALE.
    let g = abi::GetattrIn::default();
    let a: abi::AttrOut =
        abi::exact(&call(&fs, &req(8, op::FUSE_GETATTR, e.nodeid, &[g.as_bytes()])).unwrap())
            .unwrap();
    assert_eq!(a.attr.nlink, 2);
    assert_eq!(
        call(&fs, &req(10, op::FUSE_GETATTR, 999_999, &[g.as_bytes()])),
        Err(Errno::ESTALE)
    );
    assert_eq!(
        call(
            &fs,
            &req(12, op::FUSE_MKDIR, 1, &[mk.as_bytes(), &name("d")])
        ),
        Err(Errno::EEXIST)
    );
    assert_eq!(
        call(&fs, &req(14, op::FUSE_RMDIR, 1, &[&name("d")])),
        Ok(vec![])
    );
    assert_eq!(
        call(&fs, &req(16, op::FUSE_RMDIR, 1, &[&name("d")])),
        Err(Errno::ENOENT)
    );
}

#[test]
fn create_write_read_append_and_release() {
    let (_m, fs) = server();
    let rdwr = OpenFlags::RDWR | OpenFlags::CREAT;
    let ci = abi::CreateIn {
        flags: rdwr.bits(),
        mode: types::S_IFREG | 0o644,
        ..Default::default()
    };
    let r = call(
        &fs,
        &req(2, op::FUSE_CREATE, 1, &[ci.as_bytes(), &name("f")]),
    )
    .unwrap();
    assert_eq!(r.len(), 128 + 16, "fuse_entry_out + fuse_open_out");
    let e = entry(&r[..128]);
    let open: abi::OpenOut = abi::exact(&r[128..]).unwrap();
    assert_eq!(e.attr.mode, types::S_IFREG | 0o644);
    assert_eq!(
        open.open_flags & abi::fopen::FOPEN_NOFLUSH,
        0,
        "O_RDWR opens are flushed"
    );
    let write = |unique, off: u64, data: &[u8], flags: OpenFlags| {
        let w = abi::WriteIn {
            fh: open.fh,
            offset: off,
            size: data.len() as u32,
            flags: flags.bits(),
            ..Default::default()
        };
        call(
            &fs,
            &req(unique, op::FUSE_WRITE, e.nodeid, &[w.as_bytes(), data]),
        )
    };
    let n: abi::WriteOut = abi::exact(&write(4, 0, b"hello", OpenFlags::RDWR).unwrap()).unwrap();
    assert_eq!(n.size, 5);
    // The descriptor's flags as the kernel sends them now: O_APPEND (set by F_SETFL after
    // open) writes at the end whatever the offset; cleared again, at the offset.
    write(6, 0, b"++", OpenFlags::RDWR | OpenFlags::APPEND).unwrap();
    write(8, 0, b"J", OpenFlags::RDWR).unwrap();
    let read = |unique, off, size| {
        let r = abi::ReadIn {
            fh: open.fh,
            offset: off,
            size,
            ..Default::default()
        };
        call(&fs, &req(unique, op::FUSE_READ, e.nodeid, &[r.as_bytes()]))
    };
    assert_eq!(read(10, 0, 4096).unwrap(), b"Jello++");
    assert_eq!(read(12, 5, 1).unwrap(), b"+");
    assert_eq!(read(14, 100, 10).unwrap(), b"");
    // A WRITE whose data is shorter than its `size` is malformed.
    let short = abi::WriteIn {
        fh: open.fh,
        size: 10,
        ..Default::default()
    };
    assert_eq!(
        call(
            &fs,
            &req(16, op::FUSE_WRITE, e.nodeid, &[short.as_bytes(), b"abc"])
        ),
        Err(Errno::EINVAL)
    );
    let rel = abi::ReleaseIn {
        fh: open.fh,
        ..Default::default()
    };
    assert_eq!(
        call(&fs, &req(18, op::FUSE_RELEASE, e.nodeid, &[rel.as_bytes()])),
        Ok(vec![])
    );
    assert_eq!(
        call(&fs, &req(20, op::FUSE_RELEASE, e.nodeid, &[rel.as_bytes()])),
        Err(Errno::EBADF)
    );
    assert_eq!(read(22, 0, 1), Err(Errno::EBADF));
}

#[test]
fn readdir_records_fit_the_size_asked() {
    let (_m, fs) = server();
    for (u, n) in [(2, "a"), (4, "bb"), (6, "ccc")] {
        mkdir(&fs, u, n);
    }
    let oi = abi::OpenIn::default();
    let open: abi::OpenOut =
        abi::exact(&call(&fs, &req(8, op::FUSE_OPENDIR, 1, &[oi.as_bytes()])).unwrap()).unwrap();
    let rd = |unique, opcode, off, size| {
        let r = abi::ReadIn {
            fh: open.fh,
            offset: off,
            size,
            ..Default::default()
        };
        call(&fs, &req(unique, opcode, 1, &[r.as_bytes()])).unwrap()
    };
    let all = rd(10, op::FUSE_READDIR, 0, 4096);
    let mut names: Vec<Vec<u8>> = abi::dirents(&all)
        .unwrap()
        .iter()
        .map(|d| d.3.to_vec())
        .collect();
    names.sort();
    assert_eq!(names, [&b"."[..], b"..", b"a", b"bb", b"ccc"]);
    // Two 32-byte records fit in 64 bytes, and the next READDIR goes on from the cookie.
    let first = rd(12, op::FUSE_READDIR, 0, 64);
    let recs = abi::dirents(&first).unwrap();
    assert_eq!((first.len(), recs.len()), (64, 2));
    let rest = rd(14, op::FUSE_READDIR, recs[1].1, 4096);
    assert_eq!(abi::dirents(&rest).unwrap().len(), 3);
    // READDIRPLUS: each record a fuse_entry_out then the dirent; entries other than `.`
    // and `..` carry their node id.
    let plus = rd(16, op::FUSE_READDIRPLUS, 0, 4096);
    let mut b = &plus[..];
    let mut ids = vec![];
    while !b.is_empty() {
        let (e, r) = abi::EntryOut::read_from_prefix(b).unwrap();
        let (d, r) = abi::Dirent::read_from_prefix(r).unwrap();
        let nm = &r[..d.namelen as usize];
        ids.push((nm.to_vec(), e.nodeid == e.attr.ino, e.nodeid == 0));
        b = &b[(128 + 24 + d.namelen as usize + 7) & !7..];
    }
    ids.sort();
    assert_eq!(ids.len(), 5);
    assert!(ids[..2].iter().all(|(_, _, zero)| *zero), "{ids:?}");
    assert!(ids[2..].iter().all(|(_, same, _)| *same), "{ids:?}");
}

#[test]
fn setattr_times_before_1970_keep_their_nanoseconds() {
    let (_m, fs) = server();
    let e = mkdir(&fs, 2, "d");
    // touch -d '1969-12-31 23:59:59.25': (-1 s, 250000000 ns).
    let s = abi::SetattrIn {
        valid: abi::fattr::FATTR_MTIME | abi::fattr::FATTR_ATIME_NOW,
        mtime: (-1i64) as u64,
        mtimensec: 250_000_000,
        ..Default::default()
    };
    let a: abi::AttrOut =
        abi::exact(&call(&fs, &req(4, op::FUSE_SETATTR, e.nodeid, &[s.as_bytes()])).unwrap())
            .unwrap();
    assert_eq!((a.attr.mtime as i64, a.attr.mtimensec), (-1, 250_000_000));
    assert!(a.attr.atime as i64 > 1_600_000_000, "atime set to now");
    // Mode alone: the type bits stay.
    let m = abi::SetattrIn {
        valid: abi::fattr::FATTR_MODE,
        mode: 0o700,
        ..Default::default()
    };
    let a: abi::AttrOut =
        abi::exact(&call(&fs, &req(6, op::FUSE_SETATTR, e.nodeid, &[m.as_bytes()])).unwrap())
            .unwrap();
    assert_eq!(a.attr.mode, types::S_IFDIR | 0o700);
    assert_eq!(a.attr.mtime as i64, -1, "times left alone");
}

#[test]
fn xattrs_size_query_value_and_list() {
    let (_m, fs) = server();
    let e = mkdir(&fs, 2, "d");
    // Without FUSE_SETXATTR_EXT the argument is 8 bytes: size, flags.
    let set = abi::GetxattrIn {
        size: 3,
        padding: 0,
    };
    let r = req(
        4,
        op::FUSE_SETXATTR,
        e.nodeid,
        &[set.as_bytes(), &name("user.k"), b"val"],
    );
    assert_eq!(call(&fs, &r), Ok(vec![]));
    let get = |unique, size| {
        let g = abi::GetxattrIn { size, padding: 0 };
        call(
            &fs,
            &req(
                unique,
                op::FUSE_GETXATTR,
                e.nodeid,
                &[g.as_bytes(), &name("user.k")],
            ),
        )
    };
    let q: abi::GetxattrOut = abi::exact(&get(6, 0).unwrap()).unwrap();
    assert_eq!(q.size, 3);
    assert_eq!(get(8, 64).unwrap(), b"val");
    assert_eq!(get(10, 2), Err(Errno::ERANGE));
    let l = abi::GetxattrIn {
        size: 64,
        padding: 0,
    };
    assert_eq!(
        call(&fs, &req(12, op::FUSE_LISTXATTR, e.nodeid, &[l.as_bytes()])).unwrap(),
        b"user.k\0"
    );
    assert_eq!(
        call(
            &fs,
            &req(14, op::FUSE_REMOVEXATTR, e.nodeid, &[&name("user.k")])
        ),
        Ok(vec![])
    );
    assert_eq!(get(16, 64), Err(Errno::ENODATA));
}

#[test]
fn malformed_unknown_and_unanswered_requests() {
    let (_m, fs) = server();
    let mut out = Vec::new();
    // Shorter than a header: nothing to answer (no unique to answer to).
    assert!(!fs.dispatch(&[0; 20], &mut out));
    // A header whose `len` is not the bytes given.
    let mut r = req(2, op::FUSE_LOOKUP, 1, &[&name("x")]);
    r[0] += 1;
    assert_eq!(call(&fs, &r), Err(Errno::EINVAL));
    // A name without its NUL, an argument cut short.
    assert_eq!(
        call(&fs, &req(4, op::FUSE_LOOKUP, 1, &[b"x"])),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        call(&fs, &req(6, op::FUSE_READ, 1, &[&[0; 8]])),
        Err(Errno::EINVAL)
    );
    // A name with a `/` is no component.
    assert_eq!(
        call(&fs, &req(8, op::FUSE_LOOKUP, 1, &[&name("a/b")])),
        Err(Errno::EINVAL)
    );
    // What uvfs does not implement: ENOSYS, as libfuse answers (GETLK 31, IOCTL 39, an
    // opcode past the protocol's).
    for (u, opc) in [(10, 31), (12, 39), (16, 4096)] {
        assert_eq!(
            call(&fs, &req(u, opc, 1, &[&[0; 64]])),
            Err(Errno::ENOSYS),
            "{opc}"
        );
    }
    // INTERRUPT (its unique the request's | 1): no reply, neither ENOSYS (which would stop
    // interrupts on the connection) nor EAGAIN; one for a request no worker serves leaves
    // the next requests alone.
    let i = abi::InterruptIn { unique: 14 };
    assert!(!fs.dispatch(&req(15, op::FUSE_INTERRUPT, 0, &[i.as_bytes()]), &mut out));
    assert!(call(
        &fs,
        &req(
            14,
            op::FUSE_GETATTR,
            1,
            &[abi::GetattrIn::default().as_bytes()]
        )
    )
    .is_ok());
    // FLUSH: ENOSYS, so that the kernel sends none again.
    let f = abi::FlushIn::default();
    assert_eq!(
        call(&fs, &req(18, op::FUSE_FLUSH, 1, &[f.as_bytes()])),
        Err(Errno::ENOSYS)
    );
    // FORGET and BATCH_FORGET: no reply; the node goes at zero.
    let e = mkdir(&fs, 20, "d");
    let forget = abi::ForgetIn { nlookup: 1 };
    assert!(!fs.dispatch(
        &req(22, op::FUSE_FORGET, e.nodeid, &[forget.as_bytes()]),
        &mut out
    ));
    let g = abi::GetattrIn::default();
    assert_eq!(
        call(&fs, &req(24, op::FUSE_GETATTR, e.nodeid, &[g.as_bytes()])),
        Err(Errno::ESTALE)
    );
    let e = entry(&call(&fs, &req(26, op::FUSE_LOOKUP, 1, &[&name("d")])).unwrap());
    let batch = abi::BatchForgetIn { count: 1, dummy: 0 };
    let one = abi::ForgetOne {
        nodeid: e.nodeid,
        nlookup: 1,
    };
    let r = req(
        28,
        op::FUSE_BATCH_FORGET,
        0,
        &[batch.as_bytes(), one.as_bytes()],
    );
    assert!(!fs.dispatch(&r, &mut out));
    assert_eq!(
        call(&fs, &req(30, op::FUSE_GETATTR, e.nodeid, &[g.as_bytes()])),
        Err(Errno::ESTALE)
    );
}

/// Bug (issue 13 (g)): INIT's `max_pages` was `MAX_WRITE / 4096` whatever the page size,
/// so on 16 or 64 KiB pages the kernel sized requests (and the io_uring payload it
/// demands, `max_pages * PAGE_SIZE`) 4 or 16 times over `max_write`. Fix: the real page
/// size, rounded up, at least one page.
#[test]
fn max_pages_follows_the_page_size() {
    use super::{max_pages, max_pages_for, max_payload, MAX_WRITE};
    assert_eq!(max_pages_for(4096), 256);
    assert_eq!(max_pages_for(16 << 10), 64);
    assert_eq!(max_pages_for(64 << 10), 16);
    assert_eq!(max_pages_for(2 << 20), 1);
    assert_eq!(max_pages_for(0), u16::MAX);
    let page = rustix::param::page_size();
    assert_eq!(max_pages(), max_pages_for(page));
    assert!(max_payload() >= MAX_WRITE as usize);
    assert!(max_payload() >= usize::from(max_pages()) * page);
}
