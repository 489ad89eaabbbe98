//! Fixed inputs of the FUSE client's fuzz targets (`fuzz/`: `fuse_parse`, `fuse_session`;
//! docs/vfs.md), run on stable: what the fuzzers found, minimized, and hand-made hostile
//! replies; and `parse` over random bytes. Each must return, without a panic, in well
//! under a second.
//!
//! A session input is a mode byte and chunks (`uvfs::fuse::client::fuzz::session`): each
//! chunk is one packet the server sends, answering the next request the client sends (or
//! the one it waits on); its prefix says whether the header's `len` and `unique` are
//! patched to the packet's length and the request's unique. The requests come in the
//! script's order: GETATTR of the root (the mount), LOOKUP `f` (stat), LOOKUP `f` and
//! MKNOD `f` (open with O_CREAT), OPEN, WRITE, READ, LSEEK, SETATTR, FSYNC, FLUSH,
//! RELEASE, OPENDIR of the root, READDIR, ..., STATFS, DESTROY.

use proptest::prelude::*;
use uvfs::fuse::client::fuzz::{self, CHUNK_LEN, MODE_RAW_INIT, PATCH_LEN, PATCH_UNIQUE};

/// `S_IFDIR`, `S_IFREG` (inode(7)).
const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;

/// One chunk: the prefix (`flags` and the length) and `bytes`.
fn chunk(flags: u16, bytes: &[u8]) -> Vec<u8> {
    assert!(bytes.len() <= usize::from(CHUNK_LEN));
    let mut v = (flags | bytes.len() as u16).to_le_bytes().to_vec();
    v.extend_from_slice(bytes);
    v
}

/// `struct fuse_out_header` as given (no patching).
fn header(len: u32, error: i32, unique: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(16);
    h.extend_from_slice(&len.to_ne_bytes()); // len
    h.extend_from_slice(&error.to_ne_bytes()); // error
    h.extend_from_slice(&unique.to_ne_bytes()); // unique
    h
}

/// A well-formed reply to the request being answered: `error` and `payload`, with `len`
/// and `unique` patched.
fn reply(error: i32, payload: &[u8]) -> Vec<u8> {
    let mut m = header(0, error, 0);
    m.extend_from_slice(payload);
    chunk(PATCH_UNIQUE | PATCH_LEN, &m)
}

/// A successful reply carrying `payload`.
fn ok(payload: &[u8]) -> Vec<u8> {
    reply(0, payload)
}

/// `struct fuse_attr` (88 bytes) of node `ino` with `mode`, one link, the rest 0.
fn attr(ino: u64, mode: u32) -> Vec<u8> {
    attr_ctime(ino, mode, 0)
}

/// [`attr`] with `ctime` (seconds).
fn attr_ctime(ino: u64, mode: u32, ctime: u64) -> Vec<u8> {
    let mut a = Vec::with_capacity(88);
    a.extend_from_slice(&ino.to_ne_bytes()); // ino
    a.extend_from_slice(&[0; 8]); // size
    a.extend_from_slice(&[0; 8]); // blocks
    a.extend_from_slice(&[0; 16]); // atime, mtime
    a.extend_from_slice(&ctime.to_ne_bytes()); // ctime
    a.extend_from_slice(&[0; 12]); // atimensec, mtimensec, ctimensec
    a.extend_from_slice(&mode.to_ne_bytes()); // mode
    a.extend_from_slice(&1u32.to_ne_bytes()); // nlink
    a.extend_from_slice(&[0; 8]); // uid, gid
    a.extend_from_slice(&[0; 4]); // rdev
    a.extend_from_slice(&4096u32.to_ne_bytes()); // blksize
    a.extend_from_slice(&[0; 4]); // flags
    assert_eq!(a.len(), 88);
    a
}

/// `struct fuse_attr_out` (104 bytes): valid for 1000 s.
fn attr_out(ino: u64, mode: u32) -> Vec<u8> {
    let mut v = 1000u64.to_ne_bytes().to_vec(); // attr_valid
    v.extend_from_slice(&[0; 8]); // attr_valid_nsec, dummy
    v.extend(attr(ino, mode)); // attr
    v
}

/// `struct fuse_entry_out` (128 bytes) of node `nodeid`: entry and attributes valid for
/// 1000 s.
fn entry_out(nodeid: u64, mode: u32) -> Vec<u8> {
    let mut v = nodeid.to_ne_bytes().to_vec(); // nodeid
    v.extend_from_slice(&[0; 8]); // generation
    v.extend_from_slice(&1000u64.to_ne_bytes()); // entry_valid
    v.extend_from_slice(&1000u64.to_ne_bytes()); // attr_valid
    v.extend_from_slice(&[0; 8]); // entry_valid_nsec, attr_valid_nsec
    v.extend(attr(nodeid, mode)); // attr
    v
}

/// `struct fuse_open_out` (16 bytes) with handle `fh`.
fn open_out(fh: u64) -> Vec<u8> {
    let mut v = fh.to_ne_bytes().to_vec(); // fh
    v.extend_from_slice(&[0; 8]); // open_flags, padding
    v
}

/// `struct fuse_write_out` (8 bytes): `size` written.
fn write_out(size: u32) -> Vec<u8> {
    let mut v = size.to_ne_bytes().to_vec(); // size
    v.extend_from_slice(&[0; 4]); // padding
    v
}

/// `ENOENT`, negated, as a reply's `error`.
const ENOENT: i32 = -2;

/// The root's GETATTR answered (the mount succeeds), then `rest`.
fn mounted(rest: &[Vec<u8>]) -> Vec<u8> {
    let mut d = vec![0u8]; // mode: a valid INIT reply
    d.extend(ok(&attr_out(1, S_IFDIR | 0o755)));
    for c in rest {
        d.extend_from_slice(c);
    }
    d
}

/// Up to the WRITE: the stat's LOOKUP and the open's LOOKUP say ENOENT, MKNOD makes node
/// 2, OPEN gives handle 7; then `rest` from the WRITE on.
fn opened(rest: &[Vec<u8>]) -> Vec<u8> {
    let mut v = vec![
        reply(ENOENT, &[]),
        reply(ENOENT, &[]),
        ok(&entry_out(2, S_IFREG | 0o644)),
        ok(&open_out(7)),
    ];
    v.extend_from_slice(rest);
    mounted(&v)
}

/// As [`opened`], the WRITE taking its 5 bytes; `rest` from the READ on.
fn written(rest: &[Vec<u8>]) -> Vec<u8> {
    opened(&[&[ok(&write_out(5))], rest].concat())
}

/// Runs `session` on `data` and checks it came back promptly. With `UVFS_FUZZ_SEEDS` set
/// to a directory (`fuzz/corpus/fuse_session`), also writes `data` there: the
/// `fuse_session` fuzzer's seeds.
fn session(data: &[u8]) {
    if let Some(dir) = std::env::var_os("UVFS_FUZZ_SEEDS") {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        data.hash(&mut h);
        std::fs::create_dir_all(&dir).unwrap();
        let path = std::path::Path::new(&dir).join(format!("seed-{:016x}", h.finish()));
        std::fs::write(path, data).unwrap();
    }
    let t = std::time::Instant::now();
    fuzz::session(data);
    assert!(
        t.elapsed() < std::time::Duration::from_secs(4),
        "took {:?}",
        t.elapsed()
    );
}

#[test]
fn parse_hand_made_messages() {
    let cases: Vec<Vec<u8>> = vec![
        vec![],
        // A truncated header.
        header(16, 0, 4)[..9].to_vec(),
        // `len` larger than the packet.
        [header(1000, 0, 4), vec![0; 8]].concat(),
        // `len` smaller than the packet.
        [header(16, 0, 4), vec![0; 8]].concat(),
        // An error outside (-512, 0].
        header(16, -1000, 4),
        header(16, 1, 4),
        header(16, i32::MIN, 4),
        // An error carrying a payload.
        [header(24, ENOENT, 4), vec![0; 8]].concat(),
        // Notifications: unknown code, and known codes with short payloads.
        header(16, 99, 0),
        [header(20, 2, 0), vec![0; 4]].concat(),
        [header(20, 3, 0), vec![0; 4]].concat(),
        // READDIR: a name length past the buffer, 0, 256; a name with '/'.
        [header(40, 0, 4), dirent(1, 1, 200, b"abcdefgh")].concat(),
        [header(40, 0, 4), dirent(1, 1, 0, b"abcdefgh")].concat(),
        [header(40, 0, 4), dirent(1, 1, 256, b"abcdefgh")].concat(),
        [header(48, 0, 4), dirent(1, 1, 3, b"a/b\0\0\0\0\0")].concat(),
        // u32::MAX name length.
        [header(40, 0, 4), dirent(1, 1, u32::MAX, b"abcdefgh")].concat(),
    ];
    for c in &cases {
        fuzz::parse(c);
    }
    // Every payload length from 0 to a page, for every parser.
    for n in 0..4096 {
        let mut m = header(16 + n as u32, 0, 4);
        m.resize(16 + n, 0xff);
        fuzz::parse(&m);
    }
}

/// `struct fuse_dirent` (24 bytes) and the name bytes as given (not padded).
fn dirent(ino: u64, off: u64, namelen: u32, name: &[u8]) -> Vec<u8> {
    let mut v = ino.to_ne_bytes().to_vec(); // ino
    v.extend_from_slice(&off.to_ne_bytes()); // off
    v.extend_from_slice(&namelen.to_ne_bytes()); // namelen
    v.extend_from_slice(&8u32.to_ne_bytes()); // type: DT_REG
    v.extend_from_slice(name);
    v
}

#[test]
fn session_no_data_and_no_mount() {
    session(&[]);
    session(&[0]);
    session(&[MODE_RAW_INIT]);
    // INIT answered with nothing usable.
    session(&[MODE_RAW_INIT, 0, 0]);
    session(&[&[MODE_RAW_INIT][..], &reply(0, &[0; 8])].concat());
    // The root is not a directory.
    let mut d = vec![0u8];
    d.extend(ok(&attr_out(1, S_IFREG | 0o644)));
    session(&d);
}

#[test]
fn session_every_reply_hostile() {
    let hostile: Vec<(&str, Vec<u8>)> = vec![
        ("truncated header", chunk(0, &header(16, 0, 0)[..9])),
        (
            "len larger than the packet",
            chunk(PATCH_UNIQUE, &[header(1000, 0, 0), vec![0; 8]].concat()),
        ),
        ("error outside (-1000, 0]", {
            let m = header(0, -1000, 0);
            chunk(PATCH_UNIQUE | PATCH_LEN, &m)
        }),
        ("positive error", reply(5, &[])),
        ("error with payload", reply(ENOENT, &[0; 8])),
        (
            "unknown unique",
            chunk(
                PATCH_LEN,
                &[header(0, 0, 0xdead_beef), attr_out(1, S_IFDIR)].concat(),
            ),
        ),
        (
            "unique 0: unknown notification",
            chunk(PATCH_LEN, &header(0, 77, 0)),
        ),
        ("empty packet", chunk(0, &[])),
        (
            "a page of 0xff",
            chunk(PATCH_UNIQUE | PATCH_LEN, &[0xff; 4096]),
        ),
        ("ENOENT", reply(ENOENT, &[])),
        ("empty success", ok(&[])),
    ];
    for (what, c) in &hostile {
        // From the very first request (the mount's GETATTR), and after the mount.
        let every = vec![c.clone(); 48];
        let mut d = vec![0u8];
        d.extend(every.concat());
        eprintln!("{what}: from the mount on");
        session(&d);
        eprintln!("{what}: after the mount");
        session(&mounted(&every));
    }
}

#[test]
fn session_oversized_read_reply() {
    // READ of 64 bytes answered with 100.
    session(&written(&[ok(&[b'x'; 100])]));
    // With 64, LSEEK with ENOSYS (then GETATTR), SETATTR.
    session(&written(&[
        ok(&[b'x'; 64]),
        reply(-38, &[]),
        ok(&attr_out(2, S_IFREG)),
        ok(&attr_out(2, S_IFREG)),
    ]));
    // WRITE said to have written more than asked, or answered with a short payload.
    session(&opened(&[ok(&write_out(1 << 20))]));
    session(&opened(&[ok(&[5])]));
}

#[test]
fn session_readdir_name_past_the_buffer() {
    // READ reads nothing, LSEEK to RELEASE fail, then OPENDIR gives handle 9 and READDIR
    // lists a record whose name length runs past the reply.
    let mut rest: Vec<Vec<u8>> = vec![ok(&[])];
    rest.extend(vec![reply(ENOENT, &[]); 5]);
    rest.push(ok(&open_out(9)));
    rest.push(ok(&dirent(5, 3, 200, b"abcdefgh")));
    rest.push(ok(&[
        dirent(5, 3, 1, b"a\0\0\0\0\0\0\0"),
        dirent(6, 3, 1, b"b\0\0\0\0\0\0\0"),
    ]
    .concat()));
    session(&written(&rest));
    // Cookies in a circle: each reply names one entry whose cookie leads back.
    let mut rest: Vec<Vec<u8>> = vec![ok(&[])];
    rest.extend(vec![reply(ENOENT, &[]); 5]);
    rest.push(ok(&open_out(9)));
    for i in 0..40 {
        rest.push(ok(&dirent(5, i % 2 + 1, 1, b"a\0\0\0\0\0\0\0")));
    }
    session(&written(&rest));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Random messages, and random payloads behind a header that passes the length check.
    #[test]
    fn parse_random_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..600),
        error in -600i32..2,
        unique in 0u64..8,
    ) {
        fuzz::parse(&bytes);
        let mut m = header(16 + bytes.len() as u32, error, unique);
        m.extend_from_slice(&bytes);
        fuzz::parse(&m);
    }
}

/// Bug (found by reading `handshake` while writing the session target; `fuse_session`
/// had not hit it in 12 minutes): an INIT reply with `max_background` above 21845 and
/// `congestion_threshold` 0 panics the mounting thread with "attempt to multiply with
/// overflow" in debug builds (conn.rs `handshake`: `max_background * 3 / 4` in `u16`);
/// release builds wrap to a wrong threshold. Cause: Linux's default (three quarters of
/// `max_background`) computed in the field's type. Fix pending in conn.rs (compute in
/// `u32`); ignored until then.
#[test]
fn init_max_background_over_21845_does_not_overflow() {
    let mut init = vec![0u8; 64];
    init[0..4].copy_from_slice(&7u32.to_ne_bytes()); // major
    init[4..8].copy_from_slice(&38u32.to_ne_bytes()); // minor
    init[16..18].copy_from_slice(&21846u16.to_ne_bytes()); // max_background
    init[18..20].copy_from_slice(&0u16.to_ne_bytes()); // congestion_threshold: default
    let mut d = vec![MODE_RAW_INIT];
    d.extend(ok(&init));
    session(&d);
}

/// Found by `fuse_session` (a READDIR loop cut by an empty packet, chunks left over;
/// minimized by hand to this): with a FUSE file still cached in the dcache, dropping the
/// last task frees the namespace's dentries, and so the FUSE inodes, the mount and the
/// connection, only after an epoch grace period (the dcache's children are reclaimed
/// through crossbeam-epoch): no FORGET, no DESTROY and the socket left open until some
/// later uvfs call advances the epoch, so a server waiting for its end waited 5 s and
/// `session` reported "server stalled". `session` now waits for grace periods after its
/// script (as a program's later calls would); the deferred teardown itself is reported.
#[test]
fn unmount_with_a_cached_file_ends_the_session() {
    let mut rest = vec![ok(&write_out(5))];
    rest.extend(vec![reply(ENOENT, &[]); 60]);
    session(&opened(&rest));
}

/// Bug (found by `fuse_session`, two crashes, both minimized to this): a directory whose
/// server-reported ctime is past `u64::MAX` ns (18446744074 s, year 2554) and below 2^63 s
/// panics the calling thread with "attempt to multiply with overflow" in debug builds
/// when the VFS stamps it (here: the root's mtime and ctime on the O_CREAT of `f`):
/// time.rs `ts_to_ns` (`t.tv_sec as u64 * NSEC_PER_SEC`), from `stepped_back` and
/// `next_ctime`, from `Inode::ctime_locked` (inode.rs). Cause: `ts_to_ns` assumes clock
/// values, but an inode's ctime is whatever its file system reported (fs.rs `fs_attrs`
/// passes the server's seconds through). Fix pending (saturate in `ts_to_ns`, or clamp the
/// server's times in `fs_attrs`); ignored until then.
#[test]
fn huge_server_ctime_does_not_overflow_the_vfs_stamp() {
    let mut root = 1000u64.to_ne_bytes().to_vec(); // attr_valid
    root.extend_from_slice(&[0; 8]); // attr_valid_nsec, dummy
    root.extend(attr_ctime(1, S_IFDIR | 0o755, 1 << 40)); // attr: ctime 2^40 s
    let mut d = vec![0u8]; // mode: a valid INIT reply
    d.extend(ok(&root)); // the root's GETATTR
    d.extend(reply(ENOENT, &[])); // LOOKUP f (stat)
    d.extend(reply(ENOENT, &[])); // LOOKUP f (open)
    d.extend(ok(&entry_out(2, S_IFREG | 0o644))); // MKNOD f: then the root is stamped
    session(&d);
}
