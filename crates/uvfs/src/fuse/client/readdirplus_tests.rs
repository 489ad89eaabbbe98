//! READDIRPLUS (Linux fs/fuse/readdir.c: `fuse_use_readdirplus`, `parse_dirplusfile`,
//! `fuse_direntplus_link`) against a scripted server: a listing primes the dentry cache
//! (a walk to a listed name within its entry timeout sends no LOOKUP or GETATTR), every
//! lookup the server counted for a record is forgotten exactly once, a record naming a
//! different node replaces the cached entry, bad records are refused with `EIO` and their
//! lookups given back, and `FUSE_READDIRPLUS_AUTO` asks READDIRPLUS only at a listing's
//! start or when advised, as Linux.

use super::fs::{mount, FuseClientOptions, FuseServer};
use super::scripted;
use crate::fuse::abi::{self, init, opcode};
use crate::sync::plain::Mutex;
use crate::sync::plock;
use crate::types::{AtFlags, OpenFlags, S_IFDIR, S_IFLNK, S_IFREG};
use crate::{Errno, Fd, Task};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use zerocopy::{FromBytes, IntoBytes};

const CWD: Fd = Fd::AT_FDCWD;

/// One entry of the server's root directory.
#[derive(Clone)]
struct Ent {
    name: Vec<u8>,
    nodeid: u64,
    mode: u32,
}

/// What the server holds and was asked.
#[derive(Default)]
struct State {
    ents: Vec<Ent>,
    /// Every opcode received after INIT, in order.
    ops: Vec<u32>,
    /// Lookups counted (entry replies and READDIRPLUS records), by node.
    counted: HashMap<u64, u64>,
    /// Lookups forgotten (FORGET, BATCH_FORGET), by node.
    forgotten: HashMap<u64, u64>,
    /// End every READDIRPLUS reply with a record whose name is empty (refused).
    poison: bool,
    /// A READDIRPLUS record for this node id in place of `ents`' last (a hostile server).
    forge_last: Option<(u64, u32)>,
    /// `.` and `..` after `ents` rather than before (as ext4's hash order may put them).
    dots_last: bool,
    /// Record `i`'s offset is `(i + 1) * off_step` (0: as 1).
    off_step: u64,
}

struct Server {
    state: Arc<Mutex<State>>,
    /// Held: its drop ends the server thread.
    _sock: scripted::ServerEnd,
    task: Option<Task>,
}

fn attr(nodeid: u64, mode: u32) -> abi::Attr {
    abi::Attr {
        ino: 1000 + nodeid,
        size: nodeid * 10,
        mode,
        nlink: 1,
        ..Default::default()
    }
}

fn entry_out(nodeid: u64, mode: u32) -> abi::EntryOut {
    abi::EntryOut {
        nodeid,
        entry_valid: 3600,
        attr_valid: 3600,
        attr: attr(nodeid, mode),
        ..Default::default()
    }
}

/// The root's records from cookie `off` (`.` and `..` first, node id 0 as libfuse sends
/// them), as many as fit in `size` bytes; READDIRPLUS records count their lookups.
fn listing(st: &mut State, off: u64, size: usize, plus: bool) -> Vec<u8> {
    let dots = [
        Ent {
            name: b".".to_vec(),
            nodeid: 0,
            mode: S_IFDIR | 0o755,
        },
        Ent {
            name: b"..".to_vec(),
            nodeid: 0,
            mode: S_IFDIR | 0o755,
        },
    ];
    let mut all: Vec<Ent> = Vec::new();
    if !st.dots_last {
        all.extend(dots.iter().cloned());
    }
    all.extend(st.ents.iter().cloned());
    if st.dots_last {
        all.extend(dots.iter().cloned());
    }
    let step = st.off_step.max(1);
    if let (Some((id, mode)), true) = (st.forge_last, plus) {
        let last = all.last_mut().unwrap();
        last.nodeid = id;
        last.mode = mode;
    }
    let mut out = Vec::new();
    for (i, e) in all.iter().enumerate().skip((off / step) as usize) {
        let d = abi::Dirent {
            ino: 1000 + e.nodeid,
            off: (i as u64 + 1) * step,
            namelen: e.name.len() as u32,
            r#type: (e.mode >> 12) & 0xf,
        };
        let mut rec = Vec::new();
        if plus {
            let eo = if e.nodeid == 0 {
                abi::EntryOut::default()
            } else {
                entry_out(e.nodeid, e.mode)
            };
            rec.extend_from_slice(eo.as_bytes());
        }
        rec.extend_from_slice(d.as_bytes());
        rec.extend_from_slice(&e.name);
        rec.resize(abi::dirent_align(rec.len()), 0);
        if out.len() + rec.len() > size {
            break;
        }
        if plus && e.nodeid != 0 {
            *st.counted.entry(e.nodeid).or_default() += 1;
        }
        out.extend(rec);
    }
    if plus && st.poison {
        // A record with an empty name: the whole reply is refused.
        let mut rec = entry_out(77, S_IFREG | 0o644).as_bytes().to_vec();
        rec.extend_from_slice(
            abi::Dirent {
                ino: 1,
                off: 99,
                namelen: 0,
                r#type: 8,
            }
            .as_bytes(),
        );
        out.extend(rec);
    }
    out
}

/// Mounts the scripted server: it accepts READDIRPLUS when `plus`, with
/// `FUSE_READDIRPLUS_AUTO` when `auto`.
fn server(ents: &[(&str, u64, u32)], plus: bool, auto: bool) -> Server {
    let state = Arc::new(Mutex::new(State {
        ents: ents
            .iter()
            .map(|&(n, id, mode)| Ent {
                name: n.as_bytes().to_vec(),
                nodeid: id,
                mode,
            })
            .collect(),
        ..Default::default()
    }));
    let st2 = state.clone();
    let ends = scripted::spawn(1 << 20, move |h, rest, send| {
        let mut st = plock(&st2);
        if h.opcode != opcode::FUSE_INIT {
            st.ops.push(h.opcode);
        }
        let mode_of = |st: &State, id: u64| {
            st.ents
                .iter()
                .find(|e| e.nodeid == id)
                .map(|e| e.mode)
                .unwrap_or(S_IFDIR | 0o755)
        };
        match h.opcode {
            opcode::FUSE_INIT => {
                let mut flags = 0;
                if plus {
                    flags |= init::FUSE_DO_READDIRPLUS as u32;
                }
                if auto {
                    flags |= init::FUSE_READDIRPLUS_AUTO as u32;
                }
                send(h.unique, 0, scripted::init_reply(flags).as_bytes());
            }
            opcode::FUSE_GETATTR => {
                let out = abi::AttrOut {
                    attr_valid: 3600,
                    attr: attr(h.nodeid, mode_of(&st, h.nodeid)),
                    ..Default::default()
                };
                send(h.unique, 0, out.as_bytes());
            }
            opcode::FUSE_LOOKUP => {
                let name = &rest[..rest.len().saturating_sub(1)];
                match st.ents.iter().find(|e| e.name == name).cloned() {
                    Some(e) if h.nodeid == 1 => {
                        *st.counted.entry(e.nodeid).or_default() += 1;
                        send(h.unique, 0, entry_out(e.nodeid, e.mode).as_bytes());
                    }
                    _ => send(h.unique, -Errno::ENOENT.raw(), &[]),
                }
            }
            opcode::FUSE_READLINK => send(h.unique, 0, b"target"),
            opcode::FUSE_OPENDIR => {
                let out = abi::OpenOut {
                    fh: 9,
                    ..Default::default()
                };
                send(h.unique, 0, out.as_bytes());
            }
            opcode::FUSE_READDIR | opcode::FUSE_READDIRPLUS => {
                let (r, _) = abi::ReadIn::read_from_prefix(rest).unwrap();
                let plus = h.opcode == opcode::FUSE_READDIRPLUS;
                let out = listing(&mut st, r.offset, r.size as usize, plus);
                send(h.unique, 0, &out);
            }
            opcode::FUSE_FORGET => {
                let (f, _) = abi::ForgetIn::read_from_prefix(rest).unwrap();
                *st.forgotten.entry(h.nodeid).or_default() += f.nlookup;
            }
            opcode::FUSE_BATCH_FORGET => {
                let (b, ones) = abi::BatchForgetIn::read_from_prefix(rest).unwrap();
                let ones = <[abi::ForgetOne]>::ref_from_bytes(ones).unwrap();
                assert_eq!(ones.len(), b.count as usize);
                for o in ones {
                    *st.forgotten.entry(o.nodeid).or_default() += o.nlookup;
                }
            }
            opcode::FUSE_RELEASEDIR | opcode::FUSE_FLUSH | opcode::FUSE_RELEASE => {
                send(h.unique, 0, &[])
            }
            opcode::FUSE_DESTROY => {}
            _ => send(h.unique, -Errno::ENOSYS.raw(), &[]),
        }
    });
    let m = mount(
        FuseServer::Socket(ends.client),
        FuseClientOptions::default(),
    )
    .unwrap();
    Server {
        state,
        _sock: ends.server,
        task: Some(Task::init(&m)),
    }
}

impl Server {
    fn task(&self) -> &Task {
        self.task.as_ref().unwrap()
    }

    /// Lists `/` with `getdents64` calls of `bufsize` bytes; the names, sorted.
    fn list(&self, bufsize: usize) -> crate::Result<Vec<String>> {
        let t = self.task();
        let fd = t.open("/", OpenFlags::RDONLY | OpenFlags::DIRECTORY, 0)?;
        let mut out = Vec::new();
        let mut buf = vec![0u8; bufsize];
        let r = loop {
            match t.getdents64(fd, &mut buf) {
                Ok(0) => break Ok(()),
                Ok(n) => {
                    for e in crate::parse_dirents(&buf[..n]) {
                        out.push(String::from_utf8(e.name).unwrap());
                    }
                }
                Err(e) => break Err(e),
            }
        };
        t.close(fd).unwrap();
        r?;
        out.sort();
        Ok(out)
    }

    /// Opcodes received since the last call, RELEASEDIR (a background request: it may
    /// arrive after later calls' requests) and the forgets (queued, sent before a later
    /// request or in a batch; `unmount_and_check_counts` checks them) left out.
    fn take_ops(&self) -> Vec<u32> {
        let mut ops = std::mem::take(&mut plock(&self.state).ops);
        ops.retain(|&o| {
            ![
                opcode::FUSE_RELEASEDIR,
                opcode::FUSE_FORGET,
                opcode::FUSE_BATCH_FORGET,
            ]
            .contains(&o)
        });
        ops
    }

    /// Unmounts (drops the only task) and waits for DESTROY; then every lookup counted
    /// must have been forgotten exactly once.
    fn unmount_and_check_counts(mut self) {
        drop(self.task.take());
        // DESTROY comes without this thread doing anything more (the client moves the
        // epoch on itself once the super block went; before, the dentries waited in this
        // thread's garbage until its next pin).
        let t0 = Instant::now();
        while !plock(&self.state).ops.contains(&opcode::FUSE_DESTROY) {
            assert!(t0.elapsed() < Duration::from_secs(5), "no DESTROY");
            std::thread::sleep(Duration::from_millis(1));
        }
        let st = plock(&self.state);
        let counted: HashMap<u64, u64> = st
            .counted
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(&k, &v)| (k, v))
            .collect();
        assert_eq!(st.forgotten, counted, "forgotten vs counted lookups");
    }
}

const REG: u32 = S_IFREG | 0o644;

#[test]
fn a_listing_primes_the_dentry_cache_and_every_lookup_is_forgotten() {
    let s = server(
        &[("a", 2, REG), ("b", 3, REG), ("d", 4, S_IFDIR | 0o755)],
        true,
        false,
    );
    assert_eq!(
        s.list(4096),
        Ok(vec![
            ".".into(),
            "..".into(),
            "a".into(),
            "b".into(),
            "d".into()
        ])
    );
    let ops = s.take_ops();
    assert!(ops.contains(&opcode::FUSE_READDIRPLUS), "{ops:?}");
    assert!(!ops.contains(&opcode::FUSE_READDIR), "{ops:?}");
    // Walks to the listed names use what the listing gave: no LOOKUP, no GETATTR.
    for (p, id) in [("/a", 2u64), ("/b", 3), ("/d", 4)] {
        let st = s.task().fstatat(CWD, p, AtFlags::empty()).unwrap();
        assert_eq!((st.st_ino, st.st_size), (1000 + id, id as i64 * 10));
    }
    assert_eq!(s.take_ops(), Vec::<u32>::new());
    // A second listing counts each node once more; a walk still needs nothing.
    s.list(4096).unwrap();
    s.task().fstatat(CWD, "/a", AtFlags::empty()).unwrap();
    assert_eq!(
        s.take_ops(),
        [
            opcode::FUSE_OPENDIR,
            opcode::FUSE_READDIRPLUS,
            opcode::FUSE_READDIRPLUS
        ]
    );
    assert_eq!(plock(&s.state).counted.get(&2), Some(&2));
    s.unmount_and_check_counts();
}

#[test]
fn a_record_naming_another_node_replaces_the_cached_entry() {
    let s = server(&[("a", 2, REG)], true, false);
    assert_eq!(
        s.task()
            .fstatat(CWD, "/a", AtFlags::empty())
            .unwrap()
            .st_ino,
        1002
    );
    // The server's "a" is now node 5: the listing replaces the cached entry.
    plock(&s.state).ents[0].nodeid = 5;
    s.list(4096).unwrap();
    s.take_ops();
    let st = s.task().fstatat(CWD, "/a", AtFlags::empty()).unwrap();
    assert_eq!((st.st_ino, st.st_size), (1005, 50));
    assert_eq!(s.take_ops(), Vec::<u32>::new());
    s.unmount_and_check_counts();
}

/// Every record is linked, past a full buffer too, symlinks included: a symlink's target
/// is read at its first use (one READLINK, then cached), not when its inode is made
/// (before, a READDIRPLUS symlink was forgotten and a walk looked it up and read it).
#[test]
fn records_past_a_full_buffer_are_linked_symlinks_too() {
    let ents: Vec<(String, u64, u32)> = (0..20)
        .map(|i| {
            (
                format!("f{i:02}"),
                10 + i,
                if i == 7 { S_IFLNK | 0o777 } else { REG },
            )
        })
        .collect();
    let refs: Vec<(&str, u64, u32)> = ents.iter().map(|(n, i, m)| (n.as_str(), *i, *m)).collect();
    let s = server(&refs, true, false);
    // A buffer for about two records per call: the first READDIRPLUS lists them all.
    let names = s.list(64).unwrap();
    assert_eq!(names.len(), 22);
    s.take_ops();
    // Every entry is cached.
    for (n, id, _) in &ents {
        let st = s
            .task()
            .fstatat(CWD, format!("/{n}").as_str(), AtFlags::SYMLINK_NOFOLLOW)
            .unwrap();
        assert_eq!(st.st_ino, 1000 + id);
        assert_eq!(s.take_ops(), Vec::<u32>::new(), "{n}");
    }
    let mut buf = [0u8; 64];
    for _ in 0..2 {
        s.task().readlinkat(CWD, "/f07", &mut buf).unwrap();
    }
    assert_eq!(s.take_ops(), [opcode::FUSE_READLINK]);
    s.unmount_and_check_counts();
}

#[test]
fn bad_records_are_eio_and_their_lookups_given_back() {
    let s = server(&[("a", 2, REG), ("b", 3, REG)], true, false);
    plock(&s.state).poison = true;
    // `.` and `..` come from the VFS; the first call returns them, the second the error.
    assert_eq!(s.list(4096), Err(Errno::EIO));
    plock(&s.state).poison = false;
    // Nothing was linked: a walk looks the name up.
    s.take_ops();
    s.task().fstatat(CWD, "/a", AtFlags::empty()).unwrap();
    assert_eq!(s.take_ops(), [opcode::FUSE_LOOKUP]);
    // A record naming the root (or of no known type) is skipped, its lookup given back
    // for any node but the root; the rest of the listing stands.
    plock(&s.state).forge_last = Some((6, 0o170000));
    assert_eq!(s.list(4096).unwrap().len(), 4);
    plock(&s.state).forge_last = Some((1, S_IFDIR | 0o755));
    assert_eq!(s.list(4096).unwrap().len(), 4);
    // The root's lookups are never forgotten; take them out of the check.
    plock(&s.state).counted.remove(&1);
    s.unmount_and_check_counts();
}

#[test]
fn readdirplus_auto_asks_plus_at_the_start_or_when_advised() {
    let ents: Vec<(String, u64, u32)> = (0..100)
        .map(|i| (format!("n{i:02}"), 10 + i, REG))
        .collect();
    let refs: Vec<(&str, u64, u32)> = ents.iter().map(|(n, i, m)| (n.as_str(), *i, *m)).collect();
    let s = server(&refs, true, true);
    let t = s.task();
    let fd = t
        .open("/", OpenFlags::RDONLY | OpenFlags::DIRECTORY, 0)
        .unwrap();
    s.take_ops();
    // Records are 160 bytes: a READDIRPLUS of 8192 bytes holds 51 (`.`, `..`, n00 to
    // n48). A buffer of 96 bytes takes four 24-byte records per call.
    let mut buf = vec![0u8; 96];
    assert!(t.getdents64(fd, &mut buf).unwrap() > 0);
    assert_eq!(s.take_ops(), [opcode::FUSE_READDIRPLUS]);
    // Not at the start and not advised: READDIR.
    assert!(t.getdents64(fd, &mut buf).unwrap() > 0);
    assert_eq!(s.take_ops(), [opcode::FUSE_READDIR]);
    // A walk through an entry the READDIRPLUS linked advises the next call.
    t.fstatat(CWD, "/n00", AtFlags::empty()).unwrap();
    assert_eq!(s.take_ops(), Vec::<u32>::new());
    assert!(t.getdents64(fd, &mut buf).unwrap() > 0);
    assert_eq!(s.take_ops(), [opcode::FUSE_READDIRPLUS]);
    assert!(t.getdents64(fd, &mut buf).unwrap() > 0);
    assert_eq!(s.take_ops(), [opcode::FUSE_READDIR]);
    // So does a lookup in the directory (n99 was in no READDIRPLUS).
    t.fstatat(CWD, "/n99", AtFlags::empty()).unwrap();
    assert_eq!(s.take_ops(), [opcode::FUSE_LOOKUP]);
    assert!(t.getdents64(fd, &mut buf).unwrap() > 0);
    assert_eq!(s.take_ops(), [opcode::FUSE_READDIRPLUS]);
    t.close(fd).unwrap();
    s.unmount_and_check_counts();
}

#[test]
fn without_the_capability_listings_are_readdir() {
    let s = server(&[("a", 2, REG)], false, false);
    assert_eq!(s.list(4096).unwrap(), [".", "..", "a"]);
    let ops = s.take_ops();
    assert!(
        ops.contains(&opcode::FUSE_READDIR) && !ops.contains(&opcode::FUSE_READDIRPLUS),
        "{ops:?}"
    );
    s.task().fstatat(CWD, "/a", AtFlags::empty()).unwrap();
    assert_eq!(s.take_ops(), [opcode::FUSE_LOOKUP]);
    s.unmount_and_check_counts();
}

/// The listing is the server's records as they come (Linux `parse_dirfile`: `dir_emit` of
/// each record, `ctx->pos = dirent->off`): `.` and `..` where the server puts them, with
/// its inode numbers and offsets as `d_ino` and `d_off`, one READDIR per `getdents64`
/// call (`fuse_readdir_uncached`); at the end the position stays at the last offset, and
/// each later call asks again. Measured on Linux 6.18 with a kernel mount of libfuse 3.14's
/// `passthrough_ll` over an ext4 directory: the listing is the host's, `.` and `..` in hash
/// order between the other names, each `d_off` the host's, the position after the end the
/// last `d_off`. (uvfs listed `.` and `..` itself, first, and moved the server's offsets
/// up by 2, until 2026-12-07.)
#[test]
fn the_listing_is_the_servers_records_as_they_come() {
    let s = server(&[("a", 2, REG), ("b", 3, REG)], false, false);
    {
        let mut st = plock(&s.state);
        st.dots_last = true;
        st.off_step = 1000;
    }
    let t = s.task();
    let fd = t
        .open("/", OpenFlags::RDONLY | OpenFlags::DIRECTORY, 0)
        .unwrap();
    s.take_ops();
    let mut buf = vec![0u8; 4096];
    let n = t.getdents64(fd, &mut buf).unwrap();
    let got: Vec<(String, u64, i64)> = crate::parse_dirents(&buf[..n])
        .into_iter()
        .map(|e| (String::from_utf8(e.name).unwrap(), e.d_ino, e.d_off))
        .collect();
    let want = |v: &[(&str, u64, i64)]| -> Vec<(String, u64, i64)> {
        v.iter().map(|&(n, i, o)| (n.to_string(), i, o)).collect()
    };
    assert_eq!(
        got,
        want(&[
            ("a", 1002, 1000),
            ("b", 1003, 2000),
            (".", 1000, 3000),
            ("..", 1000, 4000)
        ])
    );
    assert_eq!(s.take_ops(), [opcode::FUSE_READDIR]);
    assert_eq!(t.lseek(fd, 0, crate::types::SEEK_CUR), Ok(4000));
    // The end: each call asks again from the last offset, which stays.
    assert_eq!(t.getdents64(fd, &mut buf), Ok(0));
    assert_eq!(t.getdents64(fd, &mut buf), Ok(0));
    assert_eq!(s.take_ops(), [opcode::FUSE_READDIR, opcode::FUSE_READDIR]);
    assert_eq!(t.lseek(fd, 0, crate::types::SEEK_CUR), Ok(4000));
    // A position set to one of the server's offsets resumes the listing there.
    assert_eq!(t.lseek(fd, 2000, crate::types::SEEK_SET), Ok(2000));
    let n = t.getdents64(fd, &mut buf).unwrap();
    let names: Vec<Vec<u8>> = crate::parse_dirents(&buf[..n])
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, [b".".to_vec(), b"..".to_vec()]);
    // A buffer that holds one record lists one per call, each call one READDIR.
    assert_eq!(t.lseek(fd, 0, crate::types::SEEK_SET), Ok(0));
    s.take_ops();
    let mut small = vec![0u8; 24];
    for off in [1000, 2000, 3000, 4000] {
        assert_eq!(t.getdents64(fd, &mut small), Ok(24));
        assert_eq!(crate::parse_dirents(&small)[0].d_off, off);
    }
    assert_eq!(t.getdents64(fd, &mut small), Ok(0));
    assert_eq!(s.take_ops(), [opcode::FUSE_READDIR; 5]);
    t.close(fd).unwrap();
    s.unmount_and_check_counts();
}
