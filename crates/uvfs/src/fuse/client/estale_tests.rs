//! A server that says `ESTALE` of a node: the call runs again after the entry naming the
//! node is looked up again (the VFS's `retry_estale`; Linux sends that LOOKUP for the
//! retry's `LOOKUP_REVAL` although the entry's timeout has not run out).

use super::fs::{mount, FuseClientOptions, FuseServer};
use super::scripted;
use crate::fuse::abi::{self, opcode};
use crate::sync::plain::Mutex;
use crate::sync::plock;
use crate::types::{AtFlags, OpenFlags, S_IFDIR, S_IFREG};
use crate::{Errno, Fd, Task};
use std::sync::Arc;
use zerocopy::{FromBytes, IntoBytes};

const CWD: Fd = Fd::AT_FDCWD;

/// The node `/f` names now: 3 until its first request after LOOKUP says ESTALE, then 7.
/// Every request, as `(opcode, node)` (a LINK's source node).
struct Server {
    log: Arc<Mutex<Vec<(u32, u64)>>>,
    _sock: scripted::ServerEnd,
    task: Task,
}

fn attr(ino: u64, mode: u32) -> abi::Attr {
    abi::Attr {
        ino,
        mode,
        nlink: 1,
        ..Default::default()
    }
}

/// `/f` is node 3 at the first LOOKUP, which every later request on node 3 finds gone
/// (ESTALE: the server's file was replaced behind it); later LOOKUPs give node 7. `/d`,
/// a directory, is node 4 and then 8 in the same way. Entries are trusted for an hour, a
/// file's attributes not at all (so that `stat` asks), a directory's for an hour.
fn server() -> Server {
    let log = Arc::new(Mutex::new(Vec::new()));
    let seen = log.clone();
    let ends = scripted::spawn(1 << 20, move |h, rest, send| {
        let mut log = plock(&seen);
        // A LINK is logged with its source node (the request names the new directory).
        let node = match h.opcode {
            opcode::FUSE_LINK => abi::LinkIn::read_from_prefix(rest).map_or(0, |l| l.0.oldnodeid),
            _ => h.nodeid,
        };
        log.push((h.opcode, node));
        drop(log);
        let dir = |id: u64| id == 1 || id == 4 || id == 8 || id == 9;
        match h.opcode {
            opcode::FUSE_INIT => send(h.unique, 0, scripted::init_reply(0).as_bytes()),
            opcode::FUSE_FORGET | opcode::FUSE_BATCH_FORGET | opcode::FUSE_DESTROY => {}
            _ if h.nodeid == 3
                || (h.nodeid == 4
                    && (h.opcode == opcode::FUSE_MKDIR || h.opcode == opcode::FUSE_RENAME)) =>
            {
                send(h.unique, -Errno::ESTALE.raw(), &[])
            }
            opcode::FUSE_LOOKUP if h.nodeid == 1 && (rest == b"f\0" || rest == b"d\0") => {
                let (first, then) = if rest == b"f\0" { (3, 7) } else { (4, 8) };
                let earlier = plock(&seen).iter().any(|l| l.1 == first);
                let id = if earlier { then } else { first };
                let out = abi::EntryOut {
                    nodeid: id,
                    entry_valid: 3600,
                    attr: attr(
                        id,
                        if dir(id) {
                            S_IFDIR | 0o755
                        } else {
                            S_IFREG | 0o644
                        },
                    ),
                    ..Default::default()
                };
                send(h.unique, 0, out.as_bytes());
            }
            // `/d/r`, in either of `/d`'s nodes.
            opcode::FUSE_LOOKUP if (h.nodeid == 4 || h.nodeid == 8) && rest == b"r\0" => {
                let out = abi::EntryOut {
                    nodeid: 10,
                    attr: attr(10, S_IFREG | 0o644),
                    ..Default::default()
                };
                send(h.unique, 0, out.as_bytes());
            }
            opcode::FUSE_LOOKUP => send(h.unique, -Errno::ENOENT.raw(), &[]),
            opcode::FUSE_RENAME => send(h.unique, 0, &[]),
            opcode::FUSE_LINK => {
                let (l, _) = abi::LinkIn::read_from_prefix(rest).unwrap();
                if l.oldnodeid == 3 {
                    // The source is the stale node: the request names the directory.
                    send(h.unique, -Errno::ESTALE.raw(), &[]);
                } else {
                    let out = abi::EntryOut {
                        nodeid: l.oldnodeid,
                        attr: attr(l.oldnodeid, S_IFREG | 0o644),
                        ..Default::default()
                    };
                    send(h.unique, 0, out.as_bytes());
                }
            }
            opcode::FUSE_MKDIR => {
                let out = abi::EntryOut {
                    nodeid: 9,
                    attr: attr(9, S_IFDIR | 0o755),
                    ..Default::default()
                };
                send(h.unique, 0, out.as_bytes());
            }
            opcode::FUSE_GETATTR | opcode::FUSE_SETATTR => {
                let mode = if dir(h.nodeid) {
                    S_IFDIR | 0o755
                } else {
                    S_IFREG | 0o644
                };
                let out = abi::AttrOut {
                    attr: attr(h.nodeid, mode),
                    ..Default::default()
                };
                send(h.unique, 0, out.as_bytes());
            }
            opcode::FUSE_OPEN => {
                let out = abi::OpenOut {
                    fh: 1,
                    ..Default::default()
                };
                send(h.unique, 0, out.as_bytes());
            }
            opcode::FUSE_FLUSH | opcode::FUSE_RELEASE => send(h.unique, 0, &[]),
            _ => send(h.unique, -Errno::ENOSYS.raw(), &[]),
        }
    });
    let m = mount(
        FuseServer::Socket(ends.client),
        FuseClientOptions::default(),
    )
    .unwrap();
    Server {
        log,
        _sock: ends.server,
        task: Task::init(&m),
    }
}

/// The requests on `/f`'s nodes (3 and 7) other than FORGET, and the LOOKUPs, in order.
fn on_f(s: &Server) -> Vec<(u32, u64)> {
    plock(&s.log)
        .iter()
        .copied()
        .filter(|l| {
            (l.1 == 3 || l.1 == 7 || l.0 == opcode::FUSE_LOOKUP) && l.0 != opcode::FUSE_FORGET
        })
        .collect()
}

/// `log` begins with the LOOKUP that gave node 3 and one request `op` on it (the only
/// request node 3 gets: no call repeats it while the entry is trusted), then LOOKUPs
/// (which give node 7) and requests on node 7 only, `op` among them.
fn check(log: &[(u32, u64)], op: u32) {
    assert_eq!(log[..2], [(opcode::FUSE_LOOKUP, 1), (op, 3)], "{log:?}");
    assert_eq!(log[2], (opcode::FUSE_LOOKUP, 1), "{log:?}");
    assert!(
        log[3..]
            .iter()
            .all(|l| l.0 == opcode::FUSE_LOOKUP || l.1 == 7),
        "{log:?}"
    );
    assert!(log[3..].contains(&(op, 7)), "{log:?}");
}

/// open(2): the server says ESTALE of node 3 (here to the GETATTR that refreshes its
/// attributes for the permission check); the name is looked up again and node 7 opened.
/// (Before `retry_estale`: ESTALE.)
#[test]
fn open_after_estale_looks_the_name_up_again() {
    let s = server();
    let fd = s.task.openat(CWD, "/f", OpenFlags::RDONLY, 0).unwrap();
    assert_eq!(s.task.fstat(fd).unwrap().st_ino, 7);
    s.task.close(fd).unwrap();
    let log = on_f(&s);
    check(&log, opcode::FUSE_GETATTR);
    assert!(log.contains(&(opcode::FUSE_OPEN, 7)), "{log:?}");
}

/// stat(2): GETATTR of node 3 says ESTALE; stat answers for node 7. (As Linux's FUSE
/// client, the revalidating LOOKUP that finds another node drops the entry and the walk
/// looks the name up once more.)
#[test]
fn stat_after_estale_looks_the_name_up_again() {
    let s = server();
    let st = s.task.fstatat(CWD, "/f", AtFlags::empty()).unwrap();
    assert_eq!(st.st_ino, 7);
    check(&on_f(&s), opcode::FUSE_GETATTR);
}

/// chmod(2): SETATTR of node 3 says ESTALE; the retry's SETATTR goes to node 7.
#[test]
fn chmod_after_estale_looks_the_name_up_again() {
    let s = server();
    let r = s.task.fchmodat(CWD, "/f", 0o600, AtFlags::empty());
    let log = on_f(&s);
    assert_eq!(r, Ok(()), "{log:?}");
    assert!(log.contains(&(opcode::FUSE_SETATTR, 7)), "{log:?}");
    assert_eq!(log.iter().filter(|l| l.1 == 3).count(), 1, "{log:?}");
}

/// mkdir(2) in `/d`: MKDIR in node 4 says ESTALE; the retry makes it in node 8
/// (`with_parent`'s retry, which runs `filename_create`'s call again), sending MKDIR to
/// node 4 once.
#[test]
fn mkdir_after_estale_looks_the_parent_up_again() {
    let s = server();
    let r = s.task.mkdirat(CWD, "/d/x", 0o755);
    let log = plock(&s.log).clone();
    assert_eq!(r, Ok(()), "{log:?}");
    let mkdirs: Vec<u64> = log
        .iter()
        .filter(|l| l.0 == opcode::FUSE_MKDIR)
        .map(|l| l.1)
        .collect();
    assert_eq!(mkdirs, [4, 8], "{log:?}");
}

/// link(2) of `/f`: LINK (sent to the new name's directory) says ESTALE of its source,
/// node 3; the source's entry is looked up again, and the retry links node 7.
#[test]
fn link_after_estale_of_its_source_looks_the_source_up_again() {
    let s = server();
    let r = s.task.linkat(CWD, "/f", CWD, "/g", AtFlags::empty());
    let log = plock(&s.log).clone();
    assert_eq!(r, Ok(()), "{log:?}");
    let links: Vec<u64> = log
        .iter()
        .filter(|l| l.0 == opcode::FUSE_LINK)
        .map(|l| l.1)
        .collect();
    assert_eq!(links, [3, 7], "{log:?}");
}

/// rename(2) within `/d`: RENAME in node 4 says ESTALE; renameat2's retry walks both paths
/// again and renames in node 8.
#[test]
fn rename_after_estale_looks_the_parent_up_again() {
    let s = server();
    let r = s.task.renameat(CWD, "/d/r", CWD, "/d/s");
    let log = plock(&s.log).clone();
    assert_eq!(r, Ok(()), "{log:?}");
    let renames: Vec<u64> = log
        .iter()
        .filter(|l| l.0 == opcode::FUSE_RENAME)
        .map(|l| l.1)
        .collect();
    assert_eq!(renames, [4, 8], "{log:?}");
}
