//! A walk that asks the server leaves its epoch pin first (`namei::Unlazy`, Linux's
//! `unlazy_walk`): a LOOKUP the server holds does not hold back the process's deferred
//! frees, and the walk gets the same answers as before with no LOOKUP sent twice.

use super::fs::{mount, FuseClientOptions, FuseServer};
use super::scripted;
use crate::fuse::abi::{self, opcode};
use crate::sync::plain::Mutex;
use crate::sync::plock;
use crate::types::{AtFlags, OpenFlags, RenameFlags, S_IFDIR, S_IFLNK, S_IFREG};
use crate::{Errno, Fd, Task};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use zerocopy::{FromBytes, IntoBytes};

const CWD: Fd = Fd::AT_FDCWD;

/// The server's tree: `/` (node 1), `/d` (2), `/d/f` (3), `/hang` (4, whose LOOKUP waits
/// for the test), `/ln` (5, a symlink to `d/f`), every entry and attribute with a zero
/// timeout, so that every walk asks.
const ENTS: &[(u64, &[u8], u64, u32)] = &[
    (1, b"d", 2, S_IFDIR | 0o755),
    (2, b"f", 3, S_IFREG | 0o644),
    (1, b"hang", 4, S_IFREG | 0o644),
    (1, b"ln", 5, S_IFLNK | 0o777),
];

fn attr(ino: u64, mode: u32) -> abi::Attr {
    abi::Attr {
        ino,
        mode,
        nlink: 1,
        ..Default::default()
    }
}

/// Every LOOKUP: (parent node, name).
type Lookups = Arc<Mutex<Vec<(u64, Vec<u8>)>>>;

struct Server {
    lookups: Lookups,
    /// Every GETATTR's node.
    getattrs: Arc<Mutex<Vec<u64>>>,
    /// `(opcode, node)`: the next such request is held as the LOOKUP of `hang` is; `None`
    /// once it came.
    hold: Arc<Mutex<Option<(u32, u64)>>>,
    /// Dropped or sent to: the held request is answered.
    release: mpsc::Sender<()>,
    _sock: scripted::ServerEnd,
    task: Task,
}

impl Server {
    /// Holds the next request `op` for `node`; returns whether it came (for `held_call`).
    fn hold_for(&self, op: u32, node: u64) -> impl Fn() -> bool {
        *plock(&self.hold) = Some((op, node));
        let hold = self.hold.clone();
        move || plock(&hold).is_none()
    }
}

fn server() -> Server {
    let lookups = Arc::new(Mutex::new(Vec::new()));
    let seen = lookups.clone();
    let getattrs = Arc::new(Mutex::new(Vec::new()));
    let seen_ga = getattrs.clone();
    let hold = Arc::new(Mutex::new(None));
    let held_next = hold.clone();
    let (release, held) = mpsc::channel::<()>();
    let ends = scripted::spawn(1 << 20, move |h, rest, send| {
        let mut next = plock(&held_next);
        let hold_this = *next == Some((h.opcode, h.nodeid));
        if hold_this {
            *next = None;
        }
        drop(next);
        if h.opcode == opcode::FUSE_LOOKUP {
            let name = &rest[..rest.len().saturating_sub(1)];
            plock(&seen).push((h.nodeid, name.to_vec()));
        }
        if h.opcode == opcode::FUSE_GETATTR {
            plock(&seen_ga).push(h.nodeid);
        }
        if hold_this || (h.opcode == opcode::FUSE_LOOKUP && rest == b"hang\0") {
            // Held until the test says (or ends): the server thread serves nothing else
            // meanwhile, and nothing else is asked of it.
            let _ = held.recv();
        }
        serve(h, rest, send);
    });
    let m = mount(
        FuseServer::Socket(ends.client),
        FuseClientOptions::default(),
    )
    .unwrap();
    Server {
        lookups,
        getattrs,
        hold,
        release,
        _sock: ends.server,
        task: Task::init(&m),
    }
}

/// Answers one request (the tree of [`ENTS`]).
fn serve(h: &abi::InHeader, rest: &[u8], send: &dyn Fn(u64, i32, &[u8])) {
    match h.opcode {
        opcode::FUSE_INIT => send(h.unique, 0, scripted::init_reply(0).as_bytes()),
        opcode::FUSE_GETATTR => {
            let mode = match h.nodeid {
                1 | 2 => S_IFDIR | 0o755,
                5 => S_IFLNK | 0o777,
                _ => S_IFREG | 0o644,
            };
            let out = abi::AttrOut {
                attr: attr(h.nodeid, mode),
                ..Default::default()
            };
            send(h.unique, 0, out.as_bytes());
        }
        opcode::FUSE_LOOKUP => {
            let name = &rest[..rest.len().saturating_sub(1)];
            match ENTS.iter().find(|e| e.0 == h.nodeid && e.1 == name) {
                Some(&(_, _, id, mode)) => {
                    let out = abi::EntryOut {
                        nodeid: id,
                        attr: attr(id, mode),
                        ..Default::default()
                    };
                    send(h.unique, 0, out.as_bytes());
                }
                None => send(h.unique, -Errno::ENOENT.raw(), &[]),
            }
        }
        opcode::FUSE_OPEN => {
            let out = abi::OpenOut {
                fh: 1,
                ..Default::default()
            };
            send(h.unique, 0, out.as_bytes());
        }
        opcode::FUSE_FLUSH | opcode::FUSE_RELEASE => send(h.unique, 0, &[]),
        opcode::FUSE_READLINK if h.nodeid == 5 => send(h.unique, 0, b"d/f"),
        opcode::FUSE_MKDIR => {
            let out = abi::EntryOut {
                nodeid: 6,
                attr: attr(6, S_IFDIR | 0o755),
                ..Default::default()
            };
            send(h.unique, 0, out.as_bytes());
        }
        opcode::FUSE_CREATE => {
            let e = abi::EntryOut {
                nodeid: 7,
                attr: attr(7, S_IFREG | 0o644),
                ..Default::default()
            };
            let o = abi::OpenOut {
                fh: 2,
                ..Default::default()
            };
            send(h.unique, 0, &[e.as_bytes(), o.as_bytes()].concat());
        }
        opcode::FUSE_UNLINK | opcode::FUSE_RENAME | opcode::FUSE_RENAME2 => send(h.unique, 0, &[]),
        opcode::FUSE_LINK => {
            let (l, _) = abi::LinkIn::read_from_prefix(rest).unwrap();
            let out = abi::EntryOut {
                nodeid: l.oldnodeid,
                attr: attr(l.oldnodeid, S_IFREG | 0o644),
                ..Default::default()
            };
            send(h.unique, 0, out.as_bytes());
        }
        opcode::FUSE_STATFS => send(h.unique, 0, abi::StatfsOut::default().as_bytes()),
        opcode::FUSE_SETATTR => {
            let out = abi::AttrOut {
                attr: attr(h.nodeid, S_IFREG | 0o600),
                ..Default::default()
            };
            send(h.unique, 0, out.as_bytes());
        }
        _ => send(h.unique, -Errno::ENOSYS.raw(), &[]),
    }
}

/// With a LOOKUP held by the server, another thread's deferred free still runs (before:
/// not until the LOOKUP was answered, as the walk waited pinned); the held walk then
/// completes with the server's answer.
#[test]
fn a_held_lookup_holds_back_no_deferred_free() {
    let s = server();
    let lookups = s.lookups.clone();
    let asked = move || plock(&lookups).iter().any(|l| l.1 == b"hang");
    let st = held_walk(&s, "/hang", asked);
    assert_eq!(st.st_ino, 4);
}

/// As [`a_held_lookup_holds_back_no_deferred_free`] for the GETATTR that refreshes a
/// directory's stale attributes before its search check (default permissions).
#[test]
fn a_held_search_check_holds_back_no_deferred_free() {
    let s = server();
    *plock(&s.hold) = Some((opcode::FUSE_GETATTR, 2));
    let getattrs = s.getattrs.clone();
    let asked = move || plock(&getattrs).contains(&2);
    let st = held_walk(&s, "/d/f", asked);
    assert_eq!(st.st_ino, 3);
}

/// As [`a_held_lookup_holds_back_no_deferred_free`] for the READLINK of a symlink the
/// walk follows; its target is kept, so the next walk through it sends none.
#[test]
fn a_held_readlink_holds_back_no_deferred_free() {
    let s = server();
    *plock(&s.hold) = Some((opcode::FUSE_READLINK, 5));
    let hold = s.hold.clone();
    let asked = move || plock(&hold).is_none();
    let st = held_walk(&s, "/ln", asked);
    assert_eq!(st.st_ino, 3);
    *plock(&s.hold) = Some((opcode::FUSE_READLINK, 5));
    // Released in advance: a second READLINK would be answered at once (and fail the
    // assertion below) rather than hang the test.
    s.release.send(()).unwrap();
    let st = s.task.fstatat(CWD, "/ln", AtFlags::empty()).unwrap();
    assert_eq!(st.st_ino, 3);
    assert!(plock(&s.hold).is_some(), "no second READLINK");
}

/// Walks `path` on another thread until the server holds its request (`asked`), checks
/// that a deferred free runs meanwhile, then lets the server answer: the walk's stat.
fn held_walk(s: &Server, path: &'static str, asked: impl Fn() -> bool) -> crate::Stat {
    held_call(s, asked, move |t| t.fstatat(CWD, path, AtFlags::empty()))
}

/// Runs `call` on a fork of the server's task, on another thread, until the server holds
/// its request (`asked`), checks that a deferred free runs meanwhile, then lets the
/// server answer: `call`'s result.
fn held_call<R: Send + 'static>(
    s: &Server,
    asked: impl Fn() -> bool,
    call: impl FnOnce(&Task) -> crate::Result<R> + Send + 'static,
) -> R {
    let task = s.task.fork();
    let caller = std::thread::spawn(move || call(&task));
    // Until the server holds the request.
    let sent = crate::sync::flush_deferred_until(asked, Duration::from_secs(10));
    assert!(sent, "the request was sent");
    let freed = Arc::new(AtomicBool::new(false));
    let f2 = freed.clone();
    // Relaxed: the flag orders nothing; the test only reads it back.
    crate::sync::epoch::pin().defer(move || f2.store(true, Ordering::Relaxed));
    let ran = crate::sync::flush_deferred_until(
        // Relaxed: as above.
        || freed.load(Ordering::Relaxed),
        Duration::from_secs(10),
    );
    s.release.send(()).unwrap();
    let r = caller.join().unwrap().expect("the call once answered");
    assert!(
        ran,
        "a deferred free waited for a request held by the server"
    );
    r
}

/// The requests of changes: MKDIR, UNLINK (of `/d/f`, in a directory whose attributes
/// are refreshed first), SETATTR by path (chmod), each held by the server while another
/// thread's deferred free runs, then answered; the change is then seen as the server made
/// it.
#[test]
fn held_changes_hold_back_no_deferred_free() {
    let s = server();
    let asked = s.hold_for(opcode::FUSE_MKDIR, 1);
    held_call(&s, asked, |t| t.mkdirat(CWD, "/new", 0o755));
    let asked = s.hold_for(opcode::FUSE_UNLINK, 2);
    held_call(&s, asked, |t| t.unlinkat(CWD, "/d/f", AtFlags::empty()));
    let asked = s.hold_for(opcode::FUSE_SETATTR, 3);
    held_call(&s, asked, |t| {
        t.fchmodat(CWD, "/d/f", 0o600, AtFlags::empty())
    });
}

/// The CREATE of `open(O_CREAT)` of a new name, held by the server while another
/// thread's deferred free runs (before: sent inside the open's walk, pinned), then
/// answered: the open gets the new file, opened as created (mode 0444 and `O_WRONLY`:
/// no permission check on a file the call created).
#[test]
fn a_held_create_holds_back_no_deferred_free() {
    let s = server();
    let asked = s.hold_for(opcode::FUSE_CREATE, 1);
    let fl = OpenFlags::CREAT | OpenFlags::WRONLY;
    let fd = held_call(&s, asked, move |t| {
        let fd = t.openat(CWD, "/new", fl, 0o444)?;
        let ino = t.fstat(fd)?.st_ino;
        t.close(fd)?;
        Ok(ino)
    });
    assert_eq!(fd, 7);
}

/// RENAME (in one directory, and RENAME_NOREPLACE's RENAME2), the lookup under a rename's
/// locks into another directory, and LINK, each held by the server while another thread's
/// deferred free runs (before: sent with the walks' or the locks' pin held), then
/// answered.
#[test]
fn held_renames_and_links_hold_back_no_deferred_free() {
    let s = server();
    let asked = s.hold_for(opcode::FUSE_RENAME, 2);
    held_call(&s, asked, |t| t.renameat(CWD, "/d/f", CWD, "/d/g"));
    let asked = s.hold_for(opcode::FUSE_RENAME2, 2);
    held_call(&s, asked, |t| {
        t.renameat2(CWD, "/d/f", CWD, "/d/g2", RenameFlags::NOREPLACE)
    });
    // Into another directory, over an existing name: the target's LOOKUP under the two
    // directories' locks (of `hang`, which the server holds) is sent unpinned too.
    let lookups = s.lookups.clone();
    let asked = move || plock(&lookups).iter().any(|l| l.1 == b"hang");
    held_call(&s, asked, |t| t.renameat(CWD, "/d/f", CWD, "/hang"));
    let asked = s.hold_for(opcode::FUSE_LINK, 2);
    held_call(&s, asked, |t| {
        t.linkat(CWD, "/d/f", CWD, "/d/h", AtFlags::empty())
    });
}

/// The requests a call sends for the dentry its walk ended at: the GETATTR of stat(2)
/// (zero attribute timeout), STATFS, the SETATTR of utimensat(2), each held by the server
/// while another thread's deferred free runs.
#[test]
fn held_calls_on_a_walked_dentry_hold_back_no_deferred_free() {
    let s = server();
    let asked = s.hold_for(opcode::FUSE_GETATTR, 3);
    let st = held_call(&s, asked, |t| t.fstatat(CWD, "/d/f", AtFlags::empty()));
    assert_eq!(st.st_ino, 3);
    let asked = s.hold_for(opcode::FUSE_STATFS, 3);
    held_call(&s, asked, |t| t.statfs("/d/f"));
    let asked = s.hold_for(opcode::FUSE_SETATTR, 3);
    held_call(&s, asked, |t| {
        t.utimensat(CWD, "/d/f", None, AtFlags::empty())
    });
}

/// Walks that leave for lookups get the server's answers, each LOOKUP sent once though
/// nothing is cached (zero timeouts): a two-step path, a missing name, a missing name
/// under an existing directory, a file used as a directory.
#[test]
fn walks_that_leave_get_each_answer_once() {
    let s = server();
    let lookups = || std::mem::take(&mut *plock(&s.lookups));
    plock(&s.getattrs).clear();
    let st = s.task.fstatat(CWD, "/d/f", AtFlags::empty()).unwrap();
    assert_eq!(st.st_ino, 3);
    assert_eq!(lookups(), [(1, b"d".to_vec()), (2, b"f".to_vec())]);
    // The search checks of `/` and `/d` refresh their attributes (zero timeouts), once.
    assert_eq!(std::mem::take(&mut *plock(&s.getattrs)), [1, 2, 3]);
    assert_eq!(
        s.task.fstatat(CWD, "/nope", AtFlags::empty()).err(),
        Some(Errno::ENOENT)
    );
    assert_eq!(lookups(), [(1, b"nope".to_vec())]);
    assert_eq!(
        s.task.fstatat(CWD, "/d/nope", AtFlags::empty()).err(),
        Some(Errno::ENOENT)
    );
    assert_eq!(lookups(), [(1, b"d".to_vec()), (2, b"nope".to_vec())]);
    assert_eq!(
        s.task.fstatat(CWD, "/d/f/x", AtFlags::empty()).err(),
        Some(Errno::ENOTDIR)
    );
    assert_eq!(lookups(), [(1, b"d".to_vec()), (2, b"f".to_vec())]);
    // An open, a chdir and a relative walk from there take the same way.
    let fd = s.task.openat(CWD, "/d/f", OpenFlags::RDONLY, 0).unwrap();
    assert_eq!(s.task.fstat(fd).unwrap().st_ino, 3);
    s.task.close(fd).unwrap();
    assert_eq!(lookups(), [(1, b"d".to_vec()), (2, b"f".to_vec())]);
    s.task.chdir("/d").unwrap();
    assert_eq!(lookups(), [(1, b"d".to_vec())]);
    assert_eq!(
        s.task.fstatat(CWD, "f", AtFlags::empty()).unwrap().st_ino,
        3
    );
    assert_eq!(lookups(), [(2, b"f".to_vec())]);
}
