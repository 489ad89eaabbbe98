//! Per-operation driver for callgrind: `uvfs-callgrind OP N` runs one workload's loop N
//! times inside `measured2` (collect only there with `--toggle-collect=*measured2`); the
//! per-call cost is (count at N2 - count at N1) / (N2 - N1), which cancels the set-up.
//! OP: fstat, pread, pwrite, futimes, open-close, creat-clo, syscall (the bench's loops,
//! one thread); fuse-futimes and fuse-futimes-locked: futimes through uvfs's FUSE client on
//! an in-process uvfs server (the `uvfs-fuse-client` targets of `uvfs bench --ablation`),
//! its request_end sticky or locked; dispatch-getattr: one GETATTR of the root through
//! `UvfsFuse::dispatch` (the FUSE server's per-request path, `measured2` is then
//! `dispatch_loop2`). An OP with `-limited` appended (e.g. `creat-clo-limited`) runs on a
//! tmpfs with tmpfs's default `size=`/`nr_inodes=` limits instead of an unlimited one. See
//! README.md.
use std::hint::black_box;
use uvfs::{AtFlags, Fd, OpenFlags, Task, Timespec};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(feature = "base")]
fn opts() -> uvfs::TmpfsOptions {
    Default::default()
}
#[cfg(not(feature = "base"))]
fn opts() -> uvfs::TmpfsOptions {
    uvfs::TmpfsOptions::unlimited()
}

struct Ctx {
    task: Task,
    name: Vec<u8>,
    k: u64,
    times: [[Timespec; 2]; 2],
    buf: Vec<u8>,
}

#[inline(never)]
fn measured(op: &str, c: &mut Ctx, n: u64) {
    let t = &c.task;
    match op {
        "fstat" => {
            for _ in 0..n {
                black_box(t.fstat(Fd(0)).unwrap());
            }
        }
        "pread" => {
            for i in 0..n {
                black_box(
                    t.pread(Fd(0), &mut c.buf, ((i * 4096) % 65536) as i64)
                        .unwrap(),
                );
            }
        }
        "pwrite" => {
            for i in 0..n {
                black_box(
                    t.pwrite(Fd(0), &c.buf, ((i * 4096) % 65536) as i64)
                        .unwrap(),
                );
            }
        }
        "futimes" | "fuse-futimes" | "fuse-futimes-locked" => {
            for _ in 0..n {
                t.futimens(Fd(0), Some(&c.times[0])).unwrap();
                t.futimens(Fd(0), Some(&c.times[1])).unwrap();
            }
        }
        "open-close" => {
            for _ in 0..n {
                let fd = t.openat(Fd::AT_FDCWD, "f0", OpenFlags::RDONLY, 0).unwrap();
                t.close(fd).unwrap();
            }
        }
        "creat-clo" => {
            for _ in 0..n {
                c.k += 1;
                c.name.clear();
                c.name.extend_from_slice(format!("t0-{}", c.k).as_bytes());
                let fd = t
                    .openat(
                        Fd(0),
                        &c.name[..],
                        OpenFlags::CREAT | OpenFlags::WRONLY | OpenFlags::TRUNC,
                        0o644,
                    )
                    .unwrap();
                t.close(fd).unwrap();
                t.unlinkat(Fd(0), &c.name[..], AtFlags::empty()).unwrap();
            }
        }
        "fstatat2" => {
            for _ in 0..n {
                black_box(
                    t.fstatat(Fd::AT_FDCWD, "/bench/shared", AtFlags::empty())
                        .unwrap(),
                );
            }
        }
        "stat-dir" => {
            for _ in 0..n {
                black_box(t.fstatat(Fd::AT_FDCWD, "/bench", AtFlags::empty()).unwrap());
            }
        }
        "syscall" => {
            for _ in 0..n {
                let fd = t.dup(Fd(0)).unwrap();
                t.close(fd).unwrap();
                black_box(t.getpid());
                black_box(t.getuid());
                black_box(t.umask(0o022));
            }
        }
        _ => panic!("op"),
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let limited = a[1].ends_with("-limited");
    let op = a[1].trim_end_matches("-limited").to_owned();
    let n: u64 = a[2].parse().unwrap();
    let mnt = uvfs::tmpfs::mount(if limited {
        uvfs::TmpfsOptions::default()
    } else {
        opts()
    });
    if op == "dispatch-getattr" {
        let fs = uvfs::fuse::UvfsFuse::new(&mnt, Default::default());
        let mut d = Dispatch {
            req: getattr_root(),
            out: Vec::new(),
            unique: 0,
        };
        dispatch_loop(&fs, &mut d, 1000);
        dispatch_loop2(&fs, &mut d, n);
        return;
    }
    let init = Task::init(&mnt);
    init.mkdirat(Fd::AT_FDCWD, "/bench", 0o755).unwrap();
    let _server = op
        .starts_with("fuse-")
        .then(|| fuse_bench(&init, op.ends_with("-locked")));
    let fd = init
        .open("/bench/shared", OpenFlags::CREAT | OpenFlags::RDWR, 0o644)
        .unwrap();
    init.write(fd, &vec![7u8; 65536]).unwrap();
    init.close(fd).unwrap();
    init.close(
        init.open("/bench/f0", OpenFlags::CREAT | OpenFlags::RDWR, 0o644)
            .unwrap(),
    )
    .unwrap();
    // fd 0 of the worker: the shared file, or the directory for creat-clo.
    let path = if op == "creat-clo" {
        "/bench"
    } else {
        "/bench/shared"
    };
    let flags = if op == "creat-clo" {
        OpenFlags::RDONLY | OpenFlags::DIRECTORY
    } else {
        OpenFlags::RDWR
    };
    let fd = init.open(path, flags, 0).unwrap();
    assert_eq!(fd.0, 0);
    // fstat/pread: a thread of one process (shared table); the others: a forked task.
    let task = if op == "fstat" || op == "pread" || op == "pwrite" {
        init.clone_thread()
    } else {
        init.fork()
    };
    task.chdir("/bench").unwrap();
    let ts = |s| Timespec {
        tv_sec: s,
        tv_nsec: 0,
    };
    let mut c = Ctx {
        task,
        name: Vec::new(),
        k: 0,
        times: [[ts(1), ts(2)], [ts(3), ts(4)]],
        buf: vec![0u8; 4096],
    };
    measured(&op, &mut c, 1000); // warm-up (uncounted under --toggle-collect only if named differently)
    measured2(&op, &mut c, n);
    drop(init);
}

/// Mounts uvfs's FUSE client at `/bench`, on a uvfs tmpfs served in this process by
/// `UvfsFuse` (fuser's Session, one thread) over a socket pair.
fn fuse_bench(init: &Task, locked: bool) -> std::thread::JoinHandle<std::io::Result<()>> {
    use rustix::net::{socketpair, AddressFamily, SocketFlags, SocketType};
    use uvfs::fuse::client::{self, FuseClientOptions, FuseServer, RequestEnd};
    let (mine, theirs) = socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .unwrap();
    let fs = uvfs::fuse::UvfsFuse::new(&uvfs::tmpfs::mount(opts()), Default::default());
    let h = std::thread::spawn(move || {
        fuser::Session::from_fd(
            fs,
            theirs,
            fuser::SessionACL::Owner,
            fuser::Config::default(),
        )?
        .run()
    });
    let opts = FuseClientOptions {
        request_end: if locked {
            RequestEnd::Locked
        } else {
            RequestEnd::Sticky
        },
        ..Default::default()
    };
    let m = client::mount(FuseServer::Socket(mine), opts).unwrap();
    init.mount(&m, "/bench", uvfs::MountFlags::empty()).unwrap();
    h
}

#[inline(never)]
fn measured2(op: &str, c: &mut Ctx, n: u64) {
    measured(op, c, n)
}

/// The `dispatch-getattr` loop's state: one GETATTR request, its reply buffer, the next
/// unique.
struct Dispatch {
    req: Vec<u8>,
    out: Vec<u8>,
    unique: u64,
}

/// A GETATTR of the root as the kernel sends it: `fuse_in_header` (len, opcode 3, unique,
/// nodeid 1, uid, gid, pid, total_extlen, padding) and `fuse_getattr_in` (flags, dummy, fh).
fn getattr_root() -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&56u32.to_le_bytes());
    r.extend_from_slice(&3u32.to_le_bytes());
    r.extend_from_slice(&0u64.to_le_bytes());
    r.extend_from_slice(&1u64.to_le_bytes());
    r.extend_from_slice(&[0; 16]);
    r.extend_from_slice(&[0; 16]);
    r
}

/// `n` GETATTRs through `UvfsFuse::dispatch`, each with a new (even) unique: what a server
/// worker runs per request between reading it and writing the reply.
#[inline(never)]
fn dispatch_loop(fs: &uvfs::fuse::UvfsFuse, d: &mut Dispatch, n: u64) {
    for _ in 0..n {
        d.unique += 2;
        d.req[8..16].copy_from_slice(&d.unique.to_le_bytes());
        assert!(fs.dispatch(black_box(&d.req), &mut d.out));
    }
}

#[inline(never)]
fn dispatch_loop2(fs: &uvfs::fuse::UvfsFuse, d: &mut Dispatch, n: u64) {
    dispatch_loop(fs, d, n)
}
