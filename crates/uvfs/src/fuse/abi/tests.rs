//! The wire structs against the host's `<linux/fuse.h>` (every size and field offset, as
//! the C compiler lays them out), and the message checks on good, malformed and random
//! input.

use super::*;
use crate::Errno;
use proptest::prelude::*;

/// A wire struct's C name, size and field offsets.
type Layout = (&'static str, usize, Vec<(&'static str, usize)>);

/// Every wire struct's layout.
fn layouts() -> Vec<Layout> {
    fn l<T: Wire>() -> Layout {
        (T::C_NAME, std::mem::size_of::<T>(), T::offsets())
    }
    vec![
        l::<InHeader>(),
        l::<OutHeader>(),
        l::<Attr>(),
        l::<Kstatfs>(),
        l::<EntryOut>(),
        l::<ForgetIn>(),
        l::<ForgetOne>(),
        l::<BatchForgetIn>(),
        l::<GetattrIn>(),
        l::<AttrOut>(),
        l::<MknodIn>(),
        l::<MkdirIn>(),
        l::<RenameIn>(),
        l::<Rename2In>(),
        l::<LinkIn>(),
        l::<SetattrIn>(),
        l::<OpenIn>(),
        l::<CreateIn>(),
        l::<OpenOut>(),
        l::<ReleaseIn>(),
        l::<FlushIn>(),
        l::<ReadIn>(),
        l::<WriteIn>(),
        l::<WriteOut>(),
        l::<StatfsOut>(),
        l::<FsyncIn>(),
        l::<SetxattrIn>(),
        l::<GetxattrIn>(),
        l::<GetxattrOut>(),
        l::<AccessIn>(),
        l::<InitIn>(),
        l::<InitOut>(),
        l::<InterruptIn>(),
        l::<FallocateIn>(),
        l::<LseekIn>(),
        l::<LseekOut>(),
        l::<Dirent>(),
        l::<NotifyInvalInodeOut>(),
        l::<NotifyInvalEntryOut>(),
        l::<NotifyDeleteOut>(),
    ]
}

/// Compiles a C program printing `sizeof` and every `offsetof` from `<linux/fuse.h>` and
/// compares them with the Rust layouts; also the header's version and a few constants.
#[test]
fn layouts_match_linux_fuse_h() {
    let mut c = String::from(
        "#include <linux/fuse.h>\n#include <stddef.h>\n#include <stdio.h>\nint main(void) {\n",
    );
    let mut want = vec![];
    for (name, size, fields) in layouts() {
        c += &format!("printf(\"{name} %zu\\n\", sizeof(struct {name}));\n");
        want.push(format!("{name} {size}"));
        for (f, off) in fields {
            let f = f.trim_start_matches("r#");
            c += &format!("printf(\"{name}.{f} %zu\\n\", offsetof(struct {name}, {f}));\n");
            want.push(format!("{name}.{f} {off}"));
        }
    }
    let consts = [
        ("FUSE_KERNEL_VERSION", FUSE_KERNEL_VERSION as u64),
        (
            "FUSE_KERNEL_MINOR_VERSION",
            FUSE_KERNEL_MINOR_VERSION as u64,
        ),
        ("FUSE_ROOT_ID", FUSE_ROOT_ID),
        ("FUSE_MIN_READ_BUFFER", FUSE_MIN_READ_BUFFER as u64),
        ("FUSE_NAME_OFFSET", FUSE_NAME_OFFSET as u64),
        ("FUSE_INTERRUPT", opcode::FUSE_INTERRUPT as u64),
        ("FUSE_BATCH_FORGET", opcode::FUSE_BATCH_FORGET as u64),
        ("FUSE_RENAME2", opcode::FUSE_RENAME2 as u64),
        ("FUSE_TMPFILE", opcode::FUSE_TMPFILE as u64),
        ("FUSE_NOTIFY_DELETE", notify::DELETE as u64),
        ("FUSE_MAX_PAGES", init::FUSE_MAX_PAGES),
        ("FUSE_INIT_EXT", init::FUSE_INIT_EXT),
        ("FUSE_HAS_INODE_DAX", init::FUSE_HAS_INODE_DAX),
        ("FATTR_KILL_SUIDGID", fattr::FATTR_KILL_SUIDGID as u64),
        ("FUSE_HANDLE_KILLPRIV_V2", init::FUSE_HANDLE_KILLPRIV_V2),
        ("FUSE_WRITE_CACHE", write_flags::FUSE_WRITE_CACHE as u64),
        (
            "FUSE_WRITE_KILL_SUIDGID",
            write_flags::FUSE_WRITE_KILL_SUIDGID as u64,
        ),
    ];
    for (n, v) in consts {
        c += &format!("printf(\"{n} %llu\\n\", (unsigned long long)({n}));\n");
        want.push(format!("{n} {v}"));
    }
    c += "return 0;\n}\n";
    let dir = tempfile::tempdir().unwrap();
    let (src, exe) = (dir.path().join("l.c"), dir.path().join("l"));
    std::fs::write(&src, c).unwrap();
    let cc = std::process::Command::new("cc")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("a C compiler (cc) for the layout check; Rust links with it too");
    assert!(
        cc.status.success(),
        "cc failed (is <linux/fuse.h> installed? linux-libc-dev): {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = std::process::Command::new(&exe).output().unwrap();
    let got: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let differ: Vec<String> = want
        .iter()
        .zip(&got)
        .filter(|(w, g)| w != g)
        .map(|(w, g)| format!("uvfs {w}, <linux/fuse.h> {g}"))
        .collect();
    assert!(differ.is_empty() && got.len() == want.len(), "{differ:#?}");
}

fn msg(unique: u64, error: i32, payload: &[u8]) -> Vec<u8> {
    let h = OutHeader {
        len: (16 + payload.len()) as u32,
        error,
        unique,
    };
    let mut v = h.as_bytes().to_vec();
    v.extend_from_slice(payload);
    v
}

#[test]
fn messages_are_checked_in_linux_order() {
    let ok = WriteOut {
        size: 5,
        padding: 0,
    };
    assert_eq!(
        parse_message(&msg(2, 0, ok.as_bytes())),
        Ok(Message::Reply {
            unique: 2,
            result: Ok(ok.as_bytes())
        })
    );
    assert_eq!(
        exact::<WriteOut>(ok.as_bytes()),
        Ok(WriteOut {
            size: 5,
            padding: 0
        })
    );
    assert_eq!(exact::<WriteOut>(&[0; 7]), Err(ProtoError::BadPayload));
    assert_eq!(exact::<WriteOut>(&[0; 9]), Err(ProtoError::BadPayload));
    assert_eq!(
        parse_message(&msg(4, -2, &[])),
        Ok(Message::Reply {
            unique: 4,
            result: Err(Errno::ENOENT)
        })
    );
    assert_eq!(parse_message(&[0; 15]), Err(ProtoError::Short));
    let mut long = msg(2, 0, &[1, 2]);
    long.push(3);
    assert_eq!(parse_message(&long), Err(ProtoError::BadLen));
    assert_eq!(parse_message(&msg(2, 1, &[])), Err(ProtoError::BadError));
    assert_eq!(parse_message(&msg(2, -512, &[])), Err(ProtoError::BadError));
    assert_eq!(
        parse_message(&msg(2, -5, &[0])),
        Err(ProtoError::PayloadOnError)
    );
    assert!(matches!(
        parse_message(&msg(0, notify::INVAL_ENTRY, &[0; 16])),
        Ok(Message::Notify { code: 3, .. })
    ));
    for code in [0, notify::POLL, notify::STORE, notify::RETRIEVE, 7, -1] {
        assert_eq!(
            parse_message(&msg(0, code, &[])),
            Err(ProtoError::BadNotify)
        );
    }
}

fn dirent(ino: u64, off: u64, name: &[u8]) -> Vec<u8> {
    let d = Dirent {
        ino,
        off,
        namelen: name.len() as u32,
        r#type: 8,
    };
    let mut v = d.as_bytes().to_vec();
    v.extend_from_slice(name);
    v.resize(dirent_align(v.len()), 0);
    v
}

#[test]
fn dirents_are_bounded() {
    let mut b = dirent(5, 1, b"a");
    b.extend(dirent(6, 2, b"0123456789"));
    assert_eq!(
        dirents(&b),
        Ok(vec![(5, 1, 8, &b"a"[..]), (6, 2, 8, &b"0123456789"[..])])
    );
    // A last record whose padding is cut ends the listing before it (fuse_parse_dirfile).
    let cut = &b[..b.len() - 6];
    assert_eq!(dirents(cut), Ok(vec![(5, 1, 8, &b"a"[..])]));
    // So does one whose name runs past the end; fewer than 24 bytes left are ignored.
    let mut over = dirent(1, 1, b"abc");
    over.truncate(FUSE_NAME_OFFSET + 2);
    assert_eq!(dirents(&over), Ok(vec![]));
    assert_eq!(dirents(&[0; 23]), Ok(vec![]));
    for bad in [
        dirent(1, 1, b""),
        dirent(1, 1, b"a/b"),
        dirent(1, 1, b"a\0"),
        dirent(1, 1, &[b'x'; 256]),
    ] {
        assert_eq!(dirents(&bad), Err(ProtoError::BadPayload));
    }
}

fn direntplus_rec(nodeid: u64, off: u64, name: &[u8]) -> Vec<u8> {
    let e = EntryOut {
        nodeid,
        ..Default::default()
    };
    let mut v = e.as_bytes().to_vec();
    v.extend(dirent(nodeid, off, name));
    v
}

#[test]
fn direntplus_records_are_bounded_and_keep_those_before_a_bad_one() {
    assert_eq!(FUSE_NAME_OFFSET_DIRENTPLUS, 152);
    let mut b = direntplus_rec(5, 1, b"a");
    b.extend(direntplus_rec(6, 2, b"0123456789"));
    let (recs, err) = direntplus(&b);
    assert_eq!(err, None);
    let got: Vec<_> = recs.iter().map(|(e, d)| (e.nodeid, *d)).collect();
    assert_eq!(
        got,
        vec![
            (5, (5, 1, 8, &b"a"[..])),
            (6, (6, 2, 8, &b"0123456789"[..]))
        ]
    );
    // A last record cut short ends the listing before it (parse_dirplusfile's `break`).
    let (recs, err) = direntplus(&b[..b.len() - 6]);
    assert_eq!((recs.len(), err), (1, None));
    assert_eq!(direntplus(&[0; 151]).0.len(), 0);
    // A bad record: the good ones before it come back with the error (their lookups
    // must be given back).
    for bad in [&b""[..], b"a/b", b"a\0", &[b'x'; 256]] {
        let mut v = direntplus_rec(5, 1, b"a");
        v.extend(direntplus_rec(7, 2, bad));
        let (recs, err) = direntplus(&v);
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].0.nodeid, 5);
        assert_eq!(err, Some(ProtoError::BadPayload));
    }
}

proptest! {
    /// Whatever a server sends, the checks return (never panic), and what they accept is
    /// consistent with the header.
    #[test]
    fn random_messages_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(m) = parse_message(&bytes) {
            let h = OutHeader::read_from_prefix(&bytes).unwrap().0;
            prop_assert_eq!(h.len as usize, bytes.len());
            match m {
                Message::Reply { unique, result } => {
                    prop_assert_eq!(unique, h.unique);
                    prop_assert!(unique != 0);
                    if let Ok(p) = result { prop_assert_eq!(p.len(), bytes.len() - 16) }
                }
                Message::Notify { code, .. } => prop_assert_eq!(code, h.error),
            }
        }
        let _ = dirents(&bytes);
        let _ = direntplus(&bytes);
    }

    /// Random replies with a valid header and length: accepted exactly when the error is
    /// in range and an error carries nothing.
    #[test]
    fn header_checks(unique in 1u64.., error in -600i32..3, n in 0usize..40) {
        let m = msg(unique, error, &vec![7; n]);
        let r = parse_message(&m);
        let want_ok = error > -512 && error <= 0 && (error == 0 || n == 0)
            && (error == 0 || Errno::from_raw(-error).is_some());
        prop_assert_eq!(r.is_ok(), want_ok, "{:?}", r);
    }
}
