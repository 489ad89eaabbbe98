//! Extended attributes (`getxattr`, `setxattr`, `listxattr`, `removexattr` and their `l`/`f`
//! forms), asserted against Linux's tmpfs (see `common`): values, flags, name and size
//! limits, the `user.`/`trusted.`/`security.` namespaces and their permission rules, and
//! the inode space a mount with `nr_inodes` charges them. Issue 15 (the xattr gap
//! stress-ng's xattr stressor found: only uvfs failed it).
//!
//! Lists are compared as sorted name sets: Linux's order is its rbtree's (6.x) or hash
//! table's, uvfs's is name order.

mod common;
use common::*;
use uvfs::xattr::{XATTR_CREATE, XATTR_REPLACE};
use uvfs::{Errno, Fd, OpenFlags};

type R<T> = Result<T, Errno>;

const F: XTarget<'static> = XTarget::Path(b"/f");

/// The value of `name` on `t`, read with a buffer of `cap` bytes.
fn get(s: &dyn Sys, t: XTarget<'_>, name: &[u8], cap: usize) -> R<Vec<u8>> {
    let mut buf = vec![0; cap];
    let n = s.xattr_get(t, name, &mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

/// The names `listxattr` gives for `t`, sorted; and the size it reports for an empty buffer.
fn list(s: &dyn Sys, t: XTarget<'_>) -> R<(Vec<String>, usize)> {
    let need = s.xattr_list(t, &mut [])?;
    let mut buf = vec![0; need + 16];
    let n = s.xattr_list(t, &mut buf)?;
    let mut names: Vec<String> = buf[..n]
        .split(|&c| c == 0)
        .filter(|n| !n.is_empty())
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect();
    names.sort();
    Ok((names, need))
}

#[test]
fn set_get_and_flags() {
    table::<R<Vec<u8>>>(&[
        ("roundtrip", Ok(b"hello".to_vec()), |s| {
            posix_tree(s);
            s.xattr_set(F, b"user.a", b"hello", 0)?;
            get(s, F, b"user.a", 64)
        }),
        ("size query (empty buffer)", Ok(vec![0; 5]), |s| {
            posix_tree(s);
            s.xattr_set(F, b"user.a", b"hello", 0)?;
            let n = s.xattr_get(F, b"user.a", &mut [])?;
            Ok(vec![0; n])
        }),
        ("buffer too small: ERANGE", Err(Errno::ERANGE), |s| {
            posix_tree(s);
            s.xattr_set(F, b"user.a", b"hello", 0)?;
            get(s, F, b"user.a", 4)
        }),
        ("absent: ENODATA", Err(Errno::ENODATA), |s| {
            posix_tree(s);
            get(s, F, b"user.none", 64)
        }),
        ("empty value is a value", Ok(vec![]), |s| {
            posix_tree(s);
            s.xattr_set(F, b"user.e", b"", 0)?;
            get(s, F, b"user.e", 64)
        }),
        (
            "XATTR_CREATE over an existing one: EEXIST",
            Err(Errno::EEXIST),
            |s| {
                posix_tree(s);
                s.xattr_set(F, b"user.a", b"1", 0)?;
                s.xattr_set(F, b"user.a", b"2", XATTR_CREATE)?;
                get(s, F, b"user.a", 64)
            },
        ),
        (
            "XATTR_REPLACE of an absent one: ENODATA",
            Err(Errno::ENODATA),
            |s| {
                posix_tree(s);
                s.xattr_set(F, b"user.a", b"2", XATTR_REPLACE)?;
                get(s, F, b"user.a", 64)
            },
        ),
        ("XATTR_REPLACE of an existing one", Ok(b"2".to_vec()), |s| {
            posix_tree(s);
            s.xattr_set(F, b"user.a", b"1", XATTR_CREATE)?;
            s.xattr_set(F, b"user.a", b"2", XATTR_REPLACE)?;
            get(s, F, b"user.a", 64)
        }),
        ("both flags, absent: ENODATA", Err(Errno::ENODATA), |s| {
            posix_tree(s);
            s.xattr_set(F, b"user.a", b"1", XATTR_CREATE | XATTR_REPLACE)?;
            get(s, F, b"user.a", 64)
        }),
        ("unknown flag: EINVAL", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            s.xattr_set(F, b"user.a", b"1", 4)?;
            get(s, F, b"user.a", 64)
        }),
        ("largest value (65536 bytes)", Ok(vec![7; 65536]), |s| {
            posix_tree(s);
            s.xattr_set(F, b"user.big", &[7; 65536], 0)?;
            get(s, F, b"user.big", 70000)
        }),
        ("value of 65537 bytes: E2BIG", Err(Errno::E2BIG), |s| {
            posix_tree(s);
            s.xattr_set(F, b"user.big", &[7; 65537], 0)?;
            get(s, F, b"user.big", 70000)
        }),
        ("a directory has user.*", Ok(b"v".to_vec()), |s| {
            posix_tree(s);
            let d = XTarget::Path(b"/d");
            s.xattr_set(d, b"user.a", b"v", 0)?;
            get(s, d, b"user.a", 8)
        }),
        ("setxattr follows a symlink", Ok(b"v".to_vec()), |s| {
            posix_tree(s);
            s.xattr_set(XTarget::Path(b"/l"), b"user.a", b"v", 0)?;
            get(s, F, b"user.a", 8)
        }),
        ("by descriptor (read-only open)", Ok(b"v".to_vec()), |s| {
            posix_tree(s);
            let fd = s.open(b"/f", RO, 0)?;
            s.xattr_set(XTarget::Fd(fd), b"user.a", b"v", 0)?;
            get(s, XTarget::Fd(fd), b"user.a", 8)
        }),
        ("trusted.* as root", Ok(b"t".to_vec()), |s| {
            posix_tree(s);
            s.xattr_set(F, b"trusted.a", b"t", 0)?;
            get(s, F, b"trusted.a", 8)
        }),
        ("security.* as root", Ok(b"x".to_vec()), |s| {
            posix_tree(s);
            s.xattr_set(F, b"security.uvfs_test", b"x", 0)?;
            get(s, F, b"security.uvfs_test", 8)
        }),
    ]);
}

#[test]
fn names() {
    table::<R<()>>(&[
        ("empty name: ERANGE", Err(Errno::ERANGE), |s| {
            posix_tree(s);
            s.xattr_set(F, b"", b"v", 0)
        }),
        ("256-byte name: ERANGE", Err(Errno::ERANGE), |s| {
            posix_tree(s);
            let mut n = b"user.".to_vec();
            n.resize(256, b'n');
            s.xattr_set(F, &n, b"v", 0)
        }),
        ("255-byte name", Ok(()), |s| {
            posix_tree(s);
            let mut n = b"user.".to_vec();
            n.resize(255, b'n');
            s.xattr_set(F, &n, b"v", 0)?;
            s.xattr_get(F, &n, &mut [0; 4]).map(drop)
        }),
        ("bare prefix: EINVAL", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            s.xattr_set(F, b"user.", b"v", 0)
        }),
        (
            "unknown namespace: EOPNOTSUPP",
            Err(Errno::EOPNOTSUPP),
            |s| {
                posix_tree(s);
                s.xattr_set(F, b"nosuch.a", b"v", 0)
            },
        ),
        (
            "system.* other than ACLs: EOPNOTSUPP",
            Err(Errno::EOPNOTSUPP),
            |s| {
                posix_tree(s);
                s.xattr_set(F, b"system.uvfs", b"v", 0)
            },
        ),
        (
            "name checked before the walk: ERANGE",
            Err(Errno::ERANGE),
            |s| s.xattr_set(XTarget::Path(b"/missing"), b"", b"v", 0),
        ),
        (
            "size checked before the walk: E2BIG",
            Err(Errno::E2BIG),
            |s| s.xattr_set(XTarget::Path(b"/missing"), b"user.a", &[0; 65537], 0),
        ),
        ("missing file: ENOENT", Err(Errno::ENOENT), |s| {
            s.xattr_set(XTarget::Path(b"/missing"), b"user.a", b"v", 0)
        }),
        ("get: bare prefix: EINVAL", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            s.xattr_get(F, b"user.", &mut [0; 4]).map(drop)
        }),
        (
            "get: unknown namespace: EOPNOTSUPP",
            Err(Errno::EOPNOTSUPP),
            |s| {
                posix_tree(s);
                s.xattr_get(F, b"nosuch.a", &mut [0; 4]).map(drop)
            },
        ),
    ]);
}

#[test]
fn symlinks_and_descriptors() {
    table::<R<()>>(&[
        (
            "lsetxattr user.* on a symlink: EPERM",
            Err(Errno::EPERM),
            |s| {
                posix_tree(s);
                s.xattr_set(XTarget::LPath(b"/l"), b"user.a", b"v", 0)
            },
        ),
        (
            "lgetxattr user.* on a symlink: ENODATA",
            Err(Errno::ENODATA),
            |s| {
                posix_tree(s);
                s.xattr_set(F, b"user.a", b"v", 0)?;
                s.xattr_get(XTarget::LPath(b"/l"), b"user.a", &mut [0; 4])
                    .map(drop)
            },
        ),
        ("lsetxattr trusted.* on a symlink (root)", Ok(()), |s| {
            posix_tree(s);
            let l = XTarget::LPath(b"/l");
            s.xattr_set(l, b"trusted.a", b"v", 0)?;
            s.xattr_get(l, b"trusted.a", &mut [0; 4]).map(drop)
        }),
        ("O_PATH descriptor: EBADF", Err(Errno::EBADF), |s| {
            posix_tree(s);
            let fd = s.open(b"/f", OpenFlags::PATH, 0)?;
            s.xattr_set(XTarget::Fd(fd), b"user.a", b"v", 0)
        }),
        ("O_PATH descriptor, get: EBADF", Err(Errno::EBADF), |s| {
            posix_tree(s);
            let fd = s.open(b"/f", OpenFlags::PATH, 0)?;
            s.xattr_get(XTarget::Fd(fd), b"user.a", &mut []).map(drop)
        }),
        (
            "fsetxattr: a bad name before a bad descriptor: ERANGE",
            Err(Errno::ERANGE),
            |s| s.xattr_set(XTarget::Fd(uvfs::Fd(77)), b"", b"v", 0),
        ),
        (
            "fgetxattr: a bad name before a bad descriptor: ERANGE",
            Err(Errno::ERANGE),
            |s| {
                s.xattr_get(XTarget::Fd(uvfs::Fd(77)), b"", &mut [])
                    .map(drop)
            },
        ),
        (
            "fremovexattr: a bad name before a bad descriptor: ERANGE",
            Err(Errno::ERANGE),
            |s| s.xattr_remove(XTarget::Fd(uvfs::Fd(77)), b""),
        ),
        (
            "flistxattr: bad descriptor: EBADF",
            Err(Errno::EBADF),
            |s| s.xattr_list(XTarget::Fd(uvfs::Fd(77)), &mut []).map(drop),
        ),
        (
            "remove, then remove again: ENODATA",
            Err(Errno::ENODATA),
            |s| {
                posix_tree(s);
                s.xattr_set(F, b"user.a", b"v", 0)?;
                s.xattr_remove(F, b"user.a")?;
                s.xattr_remove(F, b"user.a")
            },
        ),
        ("removed: get is ENODATA", Err(Errno::ENODATA), |s| {
            posix_tree(s);
            s.xattr_set(F, b"user.a", b"v", 0)?;
            s.xattr_remove(XTarget::Fd(s.open(b"/f", RO, 0)?), b"user.a")?;
            s.xattr_get(F, b"user.a", &mut [0; 4]).map(drop)
        }),
    ]);
}

#[test]
fn listing() {
    table::<R<(Vec<String>, usize)>>(&[
        ("none", Ok((vec![], 0)), |s| {
            posix_tree(s);
            list(s, F)
        }),
        (
            "names and size, root sees trusted.*",
            Ok((
                vec!["trusted.t".into(), "user.a".into(), "user.bb".into()],
                25,
            )),
            |s| {
                posix_tree(s);
                s.xattr_set(F, b"user.bb", b"2", 0)?;
                s.xattr_set(F, b"user.a", b"1", 0)?;
                s.xattr_set(F, b"trusted.t", b"3", 0)?;
                list(s, F)
            },
        ),
        (
            "a non-root caller does not see trusted.*",
            Ok((vec!["user.a".into()], 7)),
            |s| {
                posix_tree(s);
                s.xattr_set(F, b"user.a", b"1", 0)?;
                s.xattr_set(F, b"trusted.t", b"3", 0)?;
                s.set_cred(1000, 1000, &[]);
                list(s, F)
            },
        ),
        (
            "llistxattr of a symlink",
            Ok((vec!["trusted.l".into()], 10)),
            |s| {
                posix_tree(s);
                s.xattr_set(XTarget::LPath(b"/l"), b"trusted.l", b"1", 0)?;
                s.xattr_set(F, b"user.a", b"1", 0)?;
                list(s, XTarget::LPath(b"/l"))
            },
        ),
        ("buffer too small: ERANGE", Err(Errno::ERANGE), |s| {
            posix_tree(s);
            s.xattr_set(F, b"user.abc", b"1", 0)?;
            s.xattr_list(F, &mut [0; 8])?;
            Ok((vec![], 0))
        }),
    ]);
}

#[test]
fn permissions() {
    table::<R<()>>(&[
        (
            "non-root set user.* without write permission: EACCES",
            Err(Errno::EACCES),
            |s| {
                posix_tree(s);
                s.set_cred(1000, 1000, &[]);
                s.xattr_set(F, b"user.a", b"v", 0)
            },
        ),
        ("non-root get user.* with read permission", Ok(()), |s| {
            posix_tree(s);
            s.xattr_set(F, b"user.a", b"v", 0)?;
            s.set_cred(1000, 1000, &[]);
            s.xattr_get(F, b"user.a", &mut [0; 4]).map(drop)
        }),
        (
            "non-root get user.* without read permission: EACCES",
            Err(Errno::EACCES),
            |s| {
                posix_tree(s);
                s.xattr_set(XTarget::Path(b"/private"), b"user.a", b"v", 0)?;
                s.set_cred(1000, 1000, &[]);
                s.xattr_get(XTarget::Path(b"/private"), b"user.a", &mut [0; 4])
                    .map(drop)
            },
        ),
        ("non-root trusted.* set: EPERM", Err(Errno::EPERM), |s| {
            posix_tree(s);
            s.fchmodat(CWD, b"/f", 0o666, NOAT)?;
            s.set_cred(1000, 1000, &[]);
            s.xattr_set(F, b"trusted.a", b"v", 0)
        }),
        (
            "non-root trusted.* get: ENODATA",
            Err(Errno::ENODATA),
            |s| {
                posix_tree(s);
                s.xattr_set(F, b"trusted.a", b"v", 0)?;
                s.set_cred(1000, 1000, &[]);
                s.xattr_get(F, b"trusted.a", &mut [0; 4]).map(drop)
            },
        ),
        ("non-root security.* set: EPERM", Err(Errno::EPERM), |s| {
            posix_tree(s);
            s.fchmodat(CWD, b"/f", 0o666, NOAT)?;
            s.set_cred(1000, 1000, &[]);
            s.xattr_set(F, b"security.uvfs_test", b"v", 0)
        }),
        (
            "owner of a 0444 file may not set user.*: EACCES",
            Err(Errno::EACCES),
            |s| {
                posix_tree(s);
                s.set_cred(1000, 1000, &[]);
                s.mkfile(b"/sticky/mine", b"");
                s.fchmodat(CWD, b"/sticky/mine", 0o444, NOAT)?;
                s.xattr_set(XTarget::Path(b"/sticky/mine"), b"user.a", b"v", 0)
            },
        ),
        (
            "user.* on another's sticky directory: EPERM",
            Err(Errno::EPERM),
            |s| {
                posix_tree(s);
                s.set_cred(1000, 1000, &[]);
                s.xattr_set(XTarget::Path(b"/sticky"), b"user.a", b"v", 0)
            },
        ),
        (
            "non-root remove of trusted.*: EPERM",
            Err(Errno::EPERM),
            |s| {
                posix_tree(s);
                s.xattr_set(F, b"trusted.a", b"v", 0)?;
                s.set_cred(1000, 1000, &[]);
                s.xattr_remove(F, b"trusted.a")
            },
        ),
    ]);
}

#[test]
fn setxattr_stamps_ctime() {
    expect(Ok::<_, Errno>(true), |s| {
        posix_tree(s);
        let before = s.stat(b"/f")?.st_ctime;
        s.xattr_set(F, b"user.a", b"v", 0)?;
        let after = s.stat(b"/f")?.st_ctime;
        Ok(after > before)
    });
}

/// tmpfs charges each attribute `40 + name + value` bytes of the `nr_inodes` inode space
/// (1024 bytes an inode, `simple_xattr_space`): on a mount of 3 inodes with the root and
/// one file, 1024 bytes are left.
#[test]
fn inode_space() {
    expect_limits(1 << 20, 3, Ok::<_, Errno>((3, 0)), |s| {
        s.mkfile(b"/f", b"");
        // 40 + 6 + 978 = 1024: fits exactly; one byte more does not.
        assert_eq!(s.xattr_set(F, b"user.b", &[0; 979], 0), Err(Errno::ENOSPC));
        s.xattr_set(F, b"user.a", &[0; 978], 0)?;
        let st = s.statfs(b"/")?;
        Ok((st.f_files, st.f_ffree))
    });
    expect_limits(1 << 20, 3, Ok::<_, Errno>(1), |s| {
        s.mkfile(b"/f", b"");
        s.xattr_set(F, b"user.a", &[0; 978], 0)?;
        // Removing gives the space back: one more inode fits.
        s.xattr_remove(F, b"user.a")?;
        Ok(s.statfs(b"/")?.f_ffree)
    });
    // The last unlink gives the attributes' space back with the inode's.
    expect_limits(1 << 20, 3, Ok::<_, Errno>(2), |s| {
        s.mkfile(b"/f", b"");
        s.xattr_set(F, b"user.a", &[0; 978], 0)?;
        s.unlinkat(CWD, b"/f", NOAT)?;
        Ok(s.statfs(b"/")?.f_ffree)
    });
    // Without nr_inodes nothing is charged.
    expect_limits(1 << 20, 0, Ok::<_, Errno>(()), |s| {
        s.mkfile(b"/f", b"");
        s.xattr_set(F, b"user.a", &[0; 65536], 0)
    });
}

const CAPS: &[u8] = b"security.capability";

/// A version 2 `vfs_cap_data` with the effective flag and nothing else.
fn caps_v2() -> Vec<u8> {
    let mut v = vec![0u8; 20];
    v[..4].copy_from_slice(&0x0200_0001u32.to_le_bytes());
    v
}

/// `/f` of [`posix_tree`] with a file capability, then `change`: the capability left.
fn caps_after(s: &dyn Sys, change: impl FnOnce(&dyn Sys) -> R<()>) -> R<Vec<u8>> {
    posix_tree(s);
    s.xattr_set(F, CAPS, &caps_v2(), 0)?;
    change(s)?;
    get(s, F, CAPS, 64)
}

/// `/f` of [`posix_tree`] with a file capability; as uid 1000, `change` must fail with
/// `EPERM` (else `EPROTO` is the result); the capability left, read as uid 1000.
fn refused_then_caps(s: &mut dyn Sys, change: impl FnOnce(&dyn Sys) -> R<()>) -> R<Vec<u8>> {
    posix_tree(s);
    s.xattr_set(F, CAPS, &caps_v2(), 0)?;
    s.set_cred(1000, 1000, &[]);
    if change(s) != Err(Errno::EPERM) {
        return Err(Errno::EPROTO);
    }
    get(s, F, CAPS, 64)
}

/// Opens `/f` with `flags`, runs `f` on the descriptor, closes it.
fn with_fd(s: &dyn Sys, flags: OpenFlags, f: impl FnOnce(Fd) -> R<()>) -> R<()> {
    let fd = s.open(b"/f", flags, 0)?;
    f(fd)?;
    s.close(fd)
}

/// A file capability goes at every write, truncation and chown of a non-directory
/// (Linux's `file_remove_privs` and `ATTR_KILL_PRIV`; measured with `setcap`/`getcap`
/// on a kernel tmpfs), and again after it is set anew (a `security.` xattr clears the
/// inode's `S_NOSEC`); a read, a chmod or an empty write keeps it. Before, tmpfs kept it
/// everywhere.
#[test]
fn a_file_capability_goes_at_write_truncate_and_chown() {
    use OpenFlags as O;
    let gone: R<Vec<u8>> = Err(Errno::ENODATA);
    let kept: R<Vec<u8>> = Ok(caps_v2());
    table::<R<Vec<u8>>>(&[
        ("set, no change", kept.clone(), |s| {
            caps_after(s, |_| Ok(()))
        }),
        ("write", gone.clone(), |s| {
            caps_after(s, |s| {
                with_fd(s, O::WRONLY, |fd| s.write(fd, b"x").map(drop))
            })
        }),
        ("write, set again, pwrite", gone.clone(), |s| {
            caps_after(s, |s| {
                with_fd(s, O::WRONLY, |fd| {
                    s.write(fd, b"x")?;
                    s.xattr_set(F, CAPS, &caps_v2(), 0)?;
                    s.pwrite(fd, b"y", 3).map(drop)
                })
            })
        }),
        ("an empty write", kept.clone(), |s| {
            caps_after(s, |s| {
                with_fd(s, O::WRONLY, |fd| s.write(fd, b"").map(drop))
            })
        }),
        ("read", kept.clone(), |s| {
            caps_after(s, |s| {
                with_fd(s, O::RDONLY, |fd| s.read(fd, &mut [0u8; 8]).map(drop))
            })
        }),
        ("ftruncate", gone.clone(), |s| {
            caps_after(s, |s| with_fd(s, O::WRONLY, |fd| s.ftruncate(fd, 2)))
        }),
        ("truncate", gone.clone(), |s| {
            caps_after(s, |s| s.truncate(b"/f", 0))
        }),
        ("open(O_TRUNC)", gone.clone(), |s| {
            caps_after(s, |s| with_fd(s, O::WRONLY | O::TRUNC, |_| Ok(())))
        }),
        ("chown to the same owner", gone.clone(), |s| {
            caps_after(s, |s| s.fchownat(CWD, b"/f", 0, 0, NOAT))
        }),
        ("chmod", kept.clone(), |s| {
            caps_after(s, |s| s.fchmodat(CWD, b"/f", 0o755, NOAT))
        }),
        // A refused chown leaves it (Linux removes it at the end of `setattr_prepare`,
        // after chown_ok and chgrp_ok); a review found uvfs removing it first.
        ("a non-owner's chown, EPERM", kept.clone(), |s| {
            refused_then_caps(s, |s| s.fchownat(CWD, b"/f", 1000, u32::MAX, NOAT))
        }),
        ("a non-owner's chgrp, EPERM", kept.clone(), |s| {
            refused_then_caps(s, |s| s.fchownat(CWD, b"/f", u32::MAX, 1000, NOAT))
        }),
    ]);
}
