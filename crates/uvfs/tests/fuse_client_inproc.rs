//! The FUSE client's in-process transport (issue 11, transport 3): a server in this process
//! on the other end of a socket pair ([`FuseServer::Socket`]), here uvfs's own FUSE server
//! (a tmpfs namespace behind `fuser`, run with `fuser::Session::from_fd`: the code `uvfs
//! mount` serves the kernel with). No /dev/fuse, no kernel mount, no child process.
//!
//! The script's expected results are Linux's for the same calls on a tmpfs (write(2),
//! pread(2), utimensat(2), rename(2), rmdir(2), unlink(2) man pages); both ways of ending
//! a request ([`RequestEnd`]) must give the same.

#![cfg(feature = "fuse")]

use rustix::net::{socketpair, AddressFamily, SocketFlags, SocketType};
use uvfs::fuse::client::{self, FuseClientOptions, FuseServer, RequestEnd};
use uvfs::fuse::{FuseOptions, UvfsFuse};
use uvfs::{AtFlags, Errno, Fd, MountFlags, OpenFlags, RenameFlags, Task, Timespec};

const CWD: Fd = Fd::AT_FDCWD;

/// A uvfs tmpfs served in-process; returns the server side's task (to look at what the
/// client did), the client's task with the server's tree at `/mnt`, and the server thread.
fn mounted(end: RequestEnd) -> (Task, Task, std::thread::JoinHandle<std::io::Result<()>>) {
    let server_mnt = uvfs::mount(Default::default());
    let server_task = Task::init(&server_mnt);
    let (mine, theirs) = socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .unwrap();
    let fs = UvfsFuse::new(&server_mnt, FuseOptions::default());
    let h = std::thread::spawn(move || {
        fuser::Session::from_fd(
            fs,
            theirs,
            fuser::SessionACL::Owner,
            fuser::Config::default(),
        )?
        .run()
    });
    let task = Task::init(&uvfs::mount(Default::default()));
    task.mkdirat(CWD, "/mnt", 0o755).unwrap();
    let opts = FuseClientOptions {
        request_end: end,
        ..Default::default()
    };
    let m = client::mount(FuseServer::Socket(mine), opts).unwrap();
    task.mount(&m, "/mnt", MountFlags::empty()).unwrap();
    (server_task, task, h)
}

#[test]
fn in_process_server_runs_the_script_with_either_request_end() {
    for end in [RequestEnd::Sticky, RequestEnd::Locked] {
        let (server, task, h) = mounted(end);
        let fd = task
            .open(
                "/mnt/f",
                OpenFlags::CREAT | OpenFlags::EXCL | OpenFlags::RDWR,
                0o640,
            )
            .unwrap();
        assert_eq!(task.write(fd, b"hello world"), Ok(11));
        let mut buf = [0u8; 16];
        assert_eq!(task.pread(fd, &mut buf, 6), Ok(5));
        assert_eq!(&buf[..5], b"world");
        let t = [
            Timespec {
                tv_sec: 1_000_000_000,
                tv_nsec: 5,
            },
            Timespec {
                tv_sec: 1_200_000_000,
                tv_nsec: 7,
            },
        ];
        task.futimens(fd, Some(&t)).unwrap();
        let st = task.fstat(fd).unwrap();
        assert_eq!((st.st_size, st.st_mode & 0o7777), (11, 0o640));
        assert_eq!((st.st_atime, st.st_mtime), (t[0], t[1]));
        task.close(fd).unwrap();
        // What the client wrote is in the server's tmpfs, times included.
        let st = server.fstatat(CWD, "/f", AtFlags::empty()).unwrap();
        assert_eq!((st.st_size, st.st_mtime), (11, t[1]));
        // Linux's errnos for the namespace calls.
        assert_eq!(
            task.open("/mnt/f", OpenFlags::CREAT | OpenFlags::EXCL, 0o600),
            Err(Errno::EEXIST)
        );
        task.mkdirat(CWD, "/mnt/d", 0o755).unwrap();
        task.renameat2(CWD, "/mnt/f", CWD, "/mnt/d/g", RenameFlags::empty())
            .unwrap();
        assert_eq!(
            task.unlinkat(CWD, "/mnt/d", AtFlags::REMOVEDIR),
            Err(Errno::ENOTEMPTY)
        );
        assert_eq!(
            task.open("/mnt/f", OpenFlags::RDONLY, 0),
            Err(Errno::ENOENT)
        );
        task.unlinkat(CWD, "/mnt/d/g", AtFlags::empty()).unwrap();
        task.unlinkat(CWD, "/mnt/d", AtFlags::REMOVEDIR).unwrap();
        assert_eq!(
            server.fstatat(CWD, "/d", AtFlags::empty()).map(drop),
            Err(Errno::ENOENT)
        );
        // Unmounting and dropping the client ends the server's loop (DESTROY, then EOF).
        drop(task);
        h.join().unwrap().unwrap();
    }
}

#[test]
fn a_socket_of_the_wrong_kind_is_refused() {
    let (a, _b) = socketpair(
        AddressFamily::UNIX,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        None,
    )
    .unwrap();
    assert_eq!(
        client::mount(FuseServer::Socket(a), FuseClientOptions::default()).map(drop),
        Err(Errno::EINVAL)
    );
    let file = std::fs::File::open("/proc/self/status").unwrap();
    assert_eq!(
        client::mount(
            FuseServer::Socket(file.into()),
            FuseClientOptions::default()
        )
        .map(drop),
        Err(Errno::ENOTSOCK)
    );
}
