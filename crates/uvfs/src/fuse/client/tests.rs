//! Tests of the FUSE client's request lifecycle: the interrupt protocol's outcomes in
//! each order (unit tests), and under `--cfg uvfs_loom` the model of the three parties of
//! Linux's 2021 use-after-free (e1e71c168813) in every interleaving.

use super::request::{request_end, EndMode, InputQueue, Request, FR_FINISHED};

#[cfg(not(uvfs_loom))]
mod orders {
    use super::*;

    /// Interrupted before the reply: the reader gets the interrupt (unique | 1, the
    /// request's unique), once; the reply then finishes the request.
    #[test]
    fn interrupt_then_reply() {
        let iq = InputQueue::default();
        let p = Request::alloc(42, 2);
        // SAFETY: we hold both references until the puts below.
        let r = unsafe { p.as_ref() };
        assert_eq!(r.set_interrupted() & FR_FINISHED, 0);
        assert!(iq.queue_interrupt(r), "a reader is to be woken");
        assert!(!iq.queue_interrupt(r), "linked once");
        assert_eq!(iq.read_interrupt(), Some((43, 42)));
        assert_eq!(iq.read_interrupt(), None);
        assert!(request_end(&iq, r, EndMode::Sticky));
        assert!(
            !request_end(&iq, r, EndMode::Sticky),
            "an abort after the reply: no-op"
        );
        // SAFETY: our two references, not used after.
        unsafe {
            Request::put(p);
            Request::put(p);
        }
    }

    /// The reply came first: the interrupt is not queued at all.
    #[test]
    fn reply_then_interrupt() {
        let iq = InputQueue::default();
        let p = Request::alloc(8, 2);
        // SAFETY: as above.
        let r = unsafe { p.as_ref() };
        assert!(request_end(&iq, r, EndMode::Sticky));
        assert_ne!(
            r.set_interrupted() & FR_FINISHED,
            0,
            "the waiter sees it finished"
        );
        assert!(!iq.queue_interrupt(r));
        assert_eq!(iq.read_interrupt(), None);
        // SAFETY: as above.
        unsafe {
            Request::put(p);
            Request::put(p);
        }
    }

    /// Queued, then the reply arrives before a reader runs: `request_end` unlinks it, so
    /// the server is never told of an interrupt for a finished request, and the list
    /// holds no dangling link once the request is freed.
    #[test]
    fn queued_then_reply_unlinks() {
        for mode in [EndMode::Sticky, EndMode::Locked] {
            let iq = InputQueue::default();
            let a = Request::alloc(2, 2);
            let b = Request::alloc(4, 2);
            // SAFETY: as above.
            let (ra, rb) = unsafe { (a.as_ref(), b.as_ref()) };
            ra.set_interrupted();
            rb.set_interrupted();
            assert!(iq.queue_interrupt(ra));
            assert!(iq.queue_interrupt(rb));
            assert!(request_end(&iq, ra, mode));
            // SAFETY: as above; `a` is unlinked, so freeing it leaves no link behind.
            unsafe {
                Request::put(a);
                Request::put(a);
            }
            assert_eq!(iq.read_interrupt(), Some((5, 4)), "only the unfinished one");
            assert!(request_end(&iq, rb, mode));
            // SAFETY: as above.
            unsafe {
                Request::put(b);
                Request::put(b);
            }
        }
    }
}

/// Loom: the waiter (interrupted: sets the flag, queues the interrupt, waits for the
/// reply, drops its reference), the replier (`request_end`, drops the in-flight
/// reference) and the interrupt reader (reads the request's header under the lock,
/// holding no reference), in every interleaving. The last reference's free is a write of
/// the header that loom checks against the reader's read.
#[cfg(uvfs_loom)]
mod loom_model {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    fn three_parties(mode: EndMode) {
        loom::model(move || {
            let iq = Arc::new(InputQueue::default());
            let p = Request::alloc(10, 2);
            // Pointers are not Send; the model passes the address.
            let addr = p.as_ptr() as usize;
            let req = move || {
                // SAFETY: the model keeps the memory until every thread is joined (the
                // loom `free` only poisons the header).
                unsafe { &*(addr as *const Request) }
            };
            let waiter = {
                let iq = iq.clone();
                thread::spawn(move || {
                    let r = req();
                    if r.set_interrupted() & FR_FINISHED == 0 {
                        iq.queue_interrupt(r);
                    }
                    while r.flags() & FR_FINISHED == 0 {
                        thread::yield_now();
                    }
                    // SAFETY: the waiter's reference, not used after.
                    unsafe { Request::put(std::ptr::NonNull::new_unchecked(addr as *mut _)) };
                })
            };
            let replier = {
                let iq = iq.clone();
                thread::spawn(move || {
                    request_end(&iq, req(), mode);
                    // SAFETY: the in-flight reference, not used after.
                    unsafe { Request::put(std::ptr::NonNull::new_unchecked(addr as *mut _)) };
                })
            };
            let reader = {
                let iq = iq.clone();
                thread::spawn(move || {
                    if let Some((int, orig)) = iq.read_interrupt() {
                        assert_eq!((int, orig), (11, 10));
                    }
                })
            };
            waiter.join().unwrap();
            replier.join().unwrap();
            reader.join().unwrap();
            // No link is left to the request (it is about to be freed).
            assert_eq!(
                iq.read_interrupt(),
                None,
                "a dangling link on the interrupt list"
            );
            // SAFETY: every thread is joined; the model's allocation goes now.
            drop(unsafe { Box::from_raw(p.as_ptr()) });
        });
    }

    /// Linux since 2021: no interleaving lets the reader see the request after its free.
    #[test]
    fn sticky_flag_has_no_use_after_free() {
        three_parties(EndMode::Sticky);
    }

    /// Linux before 2018 (always locked, the ablation's "before"): safe too.
    #[test]
    fn always_locked_has_no_use_after_free() {
        three_parties(EndMode::Locked);
    }

    /// Linux 2018-2021 (`list_empty` without the lock): the model must find the reader
    /// reading the header while the last put frees it (e1e71c168813).
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn list_empty_2018_is_caught() {
        three_parties(EndMode::ListEmpty2018);
    }
}

/// The connection against unmodified libfuse (its `hello_ll` example, built from the
/// libfuse3-dev examples as `uvfs bench` builds passthrough_ll) and against a hostile
/// server (a Python script that answers INIT, then misbehaves).
#[cfg(not(uvfs_loom))]
mod conn {
    use super::super::conn::Conn;
    use super::super::request::Request;
    use crate::fuse::abi::{self, opcode, AttrOut, EntryOut, OpenIn, OpenOut, ReadIn};
    use crate::sync::plock;
    use crate::Errno;
    use std::path::PathBuf;
    use zerocopy::{FromBytes, IntoBytes};

    const EXAMPLES: &str = "/usr/share/doc/libfuse3-dev/examples";
    const ROOT: (u32, u32, u32) = (0, 0, 1);

    /// Whether `what` (a program or file these tests need) is missing: then, as the
    /// mount tests, print `skipped: why` and pass, unless `UVFS_REQUIRE_FUSE=1` (CI)
    /// makes it a failure.
    fn missing(test: &str, what: &str, ok: bool) -> bool {
        if ok {
            return false;
        }
        let why =
            format!("{test}: {what} missing (apt-get install libfuse3-dev pkg-config python3)");
        assert!(std::env::var_os("UVFS_REQUIRE_FUSE").is_none(), "{why}");
        println!("skipped: {why}");
        true
    }

    /// `hello_ll` compiled into `dir` (the example's own build line), `None` when the
    /// example or pkg-config is missing (and the test may skip).
    fn hello_ll(dir: &std::path::Path) -> Option<PathBuf> {
        example(dir, "hello_ll")
    }

    /// libfuse's example `name` compiled into `dir`, as [`hello_ll`].
    fn example(dir: &std::path::Path, name: &str) -> Option<PathBuf> {
        let src = format!("{EXAMPLES}/{name}.c");
        let have = std::path::Path::new(&src).exists()
            && std::process::Command::new("pkg-config")
                .args(["--exists", "fuse3"])
                .status()
                .is_ok_and(|s| s.success());
        if missing(name, &src, have) {
            return None;
        }
        let flags = std::process::Command::new("pkg-config")
            .args(["--cflags", "--libs", "fuse3"])
            .output()
            .expect("pkg-config");
        let flags = String::from_utf8(flags.stdout).unwrap();
        let exe = dir.join(name);
        // hello_ll_uds includes libfuse's private copy of the kernel header, which
        // libfuse3-dev does not install; the kernel's own is the same protocol.
        std::fs::write(dir.join("fuse_kernel.h"), "#include <linux/fuse.h>\n").unwrap();
        let st = std::process::Command::new("cc")
            .arg("-I")
            .arg(dir)
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .args(flags.split_whitespace())
            .status()
            .unwrap();
        assert!(st.success(), "building {name} failed");
        Some(exe)
    }

    /// After the server was killed: within 5 s a request fails with ENOTCONN or
    /// ECONNABORTED (the one in flight when a receiver saw the end), none hangs.
    fn fails_once_the_server_is_gone(c: &Conn) {
        let mut r = Ok(());
        for _ in 0..500 {
            r = lookup(c, 1, "hello").map(drop);
            if r.is_err() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let r = r.unwrap_err();
        assert!(r == Errno::ENOTCONN || r == Errno::ECONNABORTED, "{r:?}");
    }

    fn lookup(c: &Conn, parent: u64, name: &str) -> crate::Result<EntryOut> {
        let mut n = name.as_bytes().to_vec();
        n.push(0);
        let r = c.request(opcode::FUSE_LOOKUP, parent, ROOT, &[&n])?;
        Ok(abi::exact::<EntryOut>(&r).unwrap())
    }

    /// INIT, lookups, getattr, open and read against unmodified libfuse; then the server
    /// dies: requests fail with ENOTCONN, none hangs.
    #[test]
    fn hello_ll_unmodified_over_dev_fd() {
        let dir = tempfile::tempdir().unwrap();
        let Some(exe) = hello_ll(dir.path()) else {
            return;
        };
        let argv: Vec<String> = vec![exe.display().to_string(), "-f".into(), "{}".into()];
        let c = Conn::spawn(&argv).unwrap();
        let p = c.negotiated();
        assert!(
            p.minor >= abi::FUSE_MIN_MINOR_VERSION && p.minor <= 38,
            "{p:?}"
        );
        assert!(p.max_write >= 4096 && p.max_read >= 4096);
        let root = c
            .request(opcode::FUSE_GETATTR, 1, ROOT, &[&[0u8; 16]])
            .unwrap();
        let root = abi::exact::<AttrOut>(&root).unwrap();
        assert_eq!(root.attr.mode & 0o170000, 0o040000);
        let e = lookup(&c, 1, "hello").unwrap();
        assert_eq!((e.attr.mode, e.attr.size), (0o100444, 13));
        assert_eq!(lookup(&c, 1, "nope").unwrap_err(), Errno::ENOENT);
        let open = OpenIn {
            flags: 0,
            open_flags: 0,
        };
        let o = c
            .request(opcode::FUSE_OPEN, e.nodeid, ROOT, &[open.as_bytes()])
            .unwrap();
        let o = OpenOut::read_from_bytes(&o).unwrap();
        let rd = ReadIn {
            fh: o.fh,
            offset: 0,
            size: 4096,
            ..Default::default()
        };
        let data = c
            .request(opcode::FUSE_READ, e.nodeid, ROOT, &[rd.as_bytes()])
            .unwrap();
        assert_eq!(data, b"Hello World!\n");
        // Concurrent callers, each on its own unique batch and shard.
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..50 {
                        assert_eq!(lookup(&c, 1, "hello").unwrap().attr.size, 13);
                    }
                });
            }
        });
        crate::sync::plock(&c.child)
            .as_mut()
            .unwrap()
            .kill()
            .unwrap();
        fails_once_the_server_is_gone(&c);
        assert_eq!(lookup(&c, 1, "hello").unwrap_err(), Errno::ENOTCONN);
    }

    /// Transport 2: libfuse's `hello_ll_uds` (unmodified: a Unix stream socket at a fixed
    /// path, messages framed by their length) gives the same answers.
    #[test]
    fn hello_ll_uds_over_a_stream_socket() {
        let dir = tempfile::tempdir().unwrap();
        let Some(exe) = example(dir.path(), "hello_ll_uds") else {
            return;
        };
        let sock = std::path::Path::new("/tmp/libfuse-hello-ll.sock");
        let _ = std::fs::remove_file(sock);
        let mut child = std::process::Command::new(&exe)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut c = Err(Errno::ENOENT);
        for _ in 0..500 {
            c = Conn::connect(sock);
            if c.is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let c = c.unwrap();
        assert!(c.negotiated().minor >= abi::FUSE_MIN_MINOR_VERSION);
        let e = lookup(&c, 1, "hello").unwrap();
        assert_eq!((e.attr.mode, e.attr.size), (0o100444, 13));
        assert_eq!(lookup(&c, 1, "nope").unwrap_err(), Errno::ENOENT);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..50 {
                        assert_eq!(lookup(&c, 1, "hello").unwrap().attr.size, 13);
                    }
                });
            }
        });
        child.kill().unwrap();
        child.wait().unwrap();
        fails_once_the_server_is_gone(&c);
        let _ = std::fs::remove_file(sock);
    }

    /// On a stream, a header whose length cannot be right loses the framing: the
    /// connection aborts (the caller gets ECONNABORTED), it is counted, nothing hangs.
    #[test]
    fn stream_with_a_bad_length_aborts() {
        let py = std::process::Command::new("python3")
            .arg("-c")
            .arg("")
            .status();
        if missing(
            "stream_with_a_bad_length_aborts",
            "python3",
            py.is_ok_and(|s| s.success()),
        ) {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let server = r#"
import os, socket, struct, sys
l = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
l.bind(sys.argv[1]); l.listen(1)
c, _ = l.accept()
h = c.recv(40); ln, op, unique = struct.unpack_from('<IIQ', h); c.recv(ln - 40)
init = struct.pack('<IIIIHHIIHHI28x', 7, 38, 65536, 0, 0, 0, 65536, 1, 32, 0, 0)
c.sendall(struct.pack('<IiQ', 16 + len(init), 0, unique) + init)
h = c.recv(40); ln, op, unique = struct.unpack_from('<IIQ', h)
c.sendall(struct.pack('<IiQ', 8, 0, unique))
c.recv(1)
"#;
        let mut child = std::process::Command::new("python3")
            .args(["-c", server])
            .arg(&path)
            .spawn()
            .unwrap();
        let mut c = Err(Errno::ENOENT);
        for _ in 0..500 {
            c = Conn::connect(&path);
            if c.is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let c = c.unwrap();
        assert_eq!(c.negotiated().minor, 38);
        let r = c.request(opcode::FUSE_GETATTR, 1, ROOT, &[&[0u8; 16]]);
        assert_eq!(r.unwrap_err(), Errno::ECONNABORTED);
        use crate::sync::plain::Ordering;
        // Relaxed: a diagnostic counter, read after the abort.
        assert_eq!(c.stats.proto_errors.load(Ordering::Relaxed), 1);
        drop(c);
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn bad_server_commands_are_refused() {
        assert_eq!(Conn::spawn(&[]).err(), Some(Errno::EINVAL));
        let no_fd = vec!["/bin/true".to_string()];
        assert_eq!(Conn::spawn(&no_fd).err(), Some(Errno::EINVAL));
        let missing = vec!["/nonexistent/server".to_string(), "{}".to_string()];
        assert_eq!(Conn::spawn(&missing).err(), Some(Errno::ENOENT));
        // A program that exits without answering INIT.
        let quits = vec!["/bin/true".to_string(), "{}".to_string()];
        assert_eq!(Conn::spawn(&quits).err(), Some(Errno::ECONNABORTED));
        // One that neither answers nor exits: INIT gives up (10 s in the tests, 30 s else).
        let mute = ["sh", "-c", "sleep 60", "sh", "{}"].map(String::from);
        let t = std::time::Instant::now();
        assert_eq!(Conn::spawn(&mute).err(), Some(Errno::ETIMEDOUT));
        assert!(t.elapsed() < std::time::Duration::from_secs(25));
        // Or sooner, when the caller gives up (`FuseClientOptions::init_cancel`: uvfs mount
        // on SIGTERM; a fresh-user trial waited 32 s for the INIT timeout).
        static ASKED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        fn third_look() -> bool {
            // Relaxed: a counter only this test's thread touches.
            ASKED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= 2
        }
        let t = std::time::Instant::now();
        let r = Conn::spawn_with(&mute, Some(third_look));
        assert_eq!(r.err(), Some(Errno::ECANCELED));
        // Two looks of 100 ms each, then the third gives up.
        let took = t.elapsed();
        assert!(took >= std::time::Duration::from_millis(200), "{took:?}");
        assert!(took < std::time::Duration::from_secs(1), "{took:?}");
    }

    /// A hostile server: answers INIT (or, with `major`, a wrong version), then for each
    /// request by its opcode: LOOKUP a reply with a bad length, GETATTR an error out of
    /// range, READLINK a reply to an unknown unique and then the right one, OPEN an error
    /// with a payload, STATFS never (then exits).
    const HOSTILE: &str = r#"
import os, struct, sys
fd = int(sys.argv[1].rsplit('/', 1)[1])
major = int(sys.argv[2])
msg = os.read(fd, 1 << 20)
ln, op, unique = struct.unpack_from('<IIQ', msg)
init = struct.pack('<IIIIHHIIHHI28x', major, 31, 65536, 0, 0, 0, 65536, 1, 32, 0, 0)
os.write(fd, struct.pack('<IiQ', 16 + len(init), 0, unique) + init)
while True:
    msg = os.read(fd, 1 << 20)
    if not msg:
        break
    ln, op, unique = struct.unpack_from('<IIQ', msg)
    if op == 1:
        os.write(fd, struct.pack('<IiQ', 99, 0, unique) + b'x' * 8)
    elif op == 3:
        os.write(fd, struct.pack('<IiQ', 16, 1, unique))
    elif op == 5:
        os.write(fd, struct.pack('<IiQ', 17, 0, unique + 1000) + b'z')
        os.write(fd, struct.pack('<IiQ', 17, 0, unique) + b'z')
    elif op == 14:
        os.write(fd, struct.pack('<IiQ', 20, -2, unique) + b'pppp')
    elif op == 17:
        sys.exit(0)
"#;

    fn hostile(major: u32) -> crate::Result<std::sync::Arc<Conn>> {
        let argv = ["python3", "-c", HOSTILE, "{}", &major.to_string()];
        Conn::spawn(&argv.map(String::from))
    }

    #[test]
    fn hostile_server_gets_eio_and_never_hangs_a_caller() {
        let py = std::process::Command::new("python3")
            .arg("-c")
            .arg("")
            .status();
        if missing("hostile_server", "python3", py.is_ok_and(|s| s.success())) {
            return;
        }
        assert_eq!(hostile(6).err(), Some(Errno::EPROTO), "major 6 is refused");
        let c = hostile(7).unwrap();
        assert_eq!(c.negotiated().minor, 31);
        assert_eq!(c.negotiated().max_background, 12, "0 means Linux's default");
        assert_eq!(lookup(&c, 1, "x").unwrap_err(), Errno::EIO, "bad length");
        let g = c.request(opcode::FUSE_GETATTR, 1, ROOT, &[&[0u8; 16]]);
        assert_eq!(g.unwrap_err(), Errno::EIO, "error out of range");
        let r = c.request(opcode::FUSE_READLINK, 1, ROOT, &[]).unwrap();
        assert_eq!(
            r, b"z",
            "the unknown unique was dropped, the real reply taken"
        );
        let o = c.request(opcode::FUSE_OPEN, 1, ROOT, &[&[0u8; 8]]);
        assert_eq!(o.unwrap_err(), Errno::EIO, "payload on an error");
        for op in [
            opcode::FUSE_FORGET,
            opcode::FUSE_BATCH_FORGET,
            opcode::FUSE_INTERRUPT,
        ] {
            let r = c.request(op, 1, ROOT, &[&[0u8; 8]]);
            assert_eq!(
                r.unwrap_err(),
                Errno::EINVAL,
                "never answered: not waited for"
            );
        }
        let s = c.request(opcode::FUSE_STATFS, 1, ROOT, &[]);
        assert_eq!(
            s.unwrap_err(),
            Errno::ECONNABORTED,
            "in flight when the server went"
        );
        assert_eq!(
            c.request(opcode::FUSE_STATFS, 1, ROOT, &[]).unwrap_err(),
            Errno::ENOTCONN
        );
        use crate::sync::plain::Ordering;
        // Relaxed: diagnostic counters read after the connection aborted (nothing counts later).
        assert_eq!(c.stats.unknown_uniques.load(Ordering::Relaxed), 1);
        // Relaxed: as above.
        assert_eq!(c.stats.proto_errors.load(Ordering::Relaxed), 3);
    }

    /// What the recording server saw, in order: (opcode, nodeid, payload).
    type Seen = std::sync::Arc<crate::sync::plain::Mutex<Vec<(u32, u64, Vec<u8>)>>>;

    /// A SEQPACKET socket pair: (the client's end, the test server's).
    fn seqpacket_pair() -> (rustix::fd::OwnedFd, rustix::fd::OwnedFd) {
        rustix::net::socketpair(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::SEQPACKET,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )
        .unwrap()
    }

    /// A test server's message: a header (`unique`, `error`) and `payload`.
    fn send_out(fd: &rustix::fd::OwnedFd, unique: u64, error: i32, payload: &[u8]) {
        let h = crate::fuse::abi::OutHeader {
            len: (16 + payload.len()) as u32,
            error,
            unique,
        };
        let mut m = h.as_bytes().to_vec();
        m.extend_from_slice(payload);
        let _ = rustix::net::send(fd, &m, rustix::net::SendFlags::NOSIGNAL);
    }

    /// Serves `theirs` on a new thread until the client's end closes: INIT answered (7.31,
    /// `max_write` 64 KiB, `max_background`), then every request, INIT included, handed to
    /// `handler(header, payload, fd)`.
    fn serve(
        theirs: rustix::fd::OwnedFd,
        max_background: u16,
        mut handler: impl FnMut(&crate::fuse::abi::InHeader, &[u8], &rustix::fd::OwnedFd)
            + Send
            + 'static,
    ) {
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let n = match rustix::net::recv(&theirs, &mut buf, rustix::net::RecvFlags::empty())
                {
                    Ok((0, _)) | Err(_) => return,
                    Ok((n, _)) => n,
                };
                let (h, rest) = crate::fuse::abi::InHeader::read_from_prefix(&buf[..n]).unwrap();
                if h.opcode == opcode::FUSE_INIT {
                    let out = crate::fuse::abi::InitOut {
                        major: 7,
                        minor: 31,
                        max_write: 65536,
                        max_background,
                        ..Default::default()
                    };
                    send_out(&theirs, h.unique, 0, out.as_bytes());
                }
                handler(&h, rest, &theirs);
            }
        });
    }

    /// A server in a thread on a socket pair (transport 3): answers INIT with
    /// `max_background` 2, GETATTR at once (an empty reply, which the test does not
    /// parse), holds RELEASEs unanswered until `release_all` is sent (opcode 9999, a test
    /// message), then answers all; records every message and the most RELEASEs it held
    /// unanswered at once.
    fn recording_server() -> (std::sync::Arc<Conn>, Seen, std::sync::Arc<AtomicUsizeMax>) {
        let (mine, theirs) = seqpacket_pair();
        let seen: Seen = Default::default();
        let most = std::sync::Arc::new(AtomicUsizeMax::default());
        let (seen2, most2) = (seen.clone(), most.clone());
        let mut held = Vec::new();
        let mut held_slow: Vec<(u64, u64, u32)> = Vec::new();
        serve(theirs, 2, move |h, rest, theirs| {
            let send = |unique: u64, payload: &[u8]| send_out(theirs, unique, 0, payload);
            let send_err = |unique: u64, error: i32| send_out(theirs, unique, error, &[]);
            plock(&seen2).push((h.opcode, h.nodeid, rest.to_vec()));
            match h.opcode {
                opcode::FUSE_GETATTR => send(h.unique, &[]),
                // Held until interrupted (9997); the first INTERRUPT of a request is
                // answered EAGAIN when the request's nodeid is 2 (ask again), the
                // next (or the only one) gives the request up: EINTR.
                9997 => held_slow.push((h.unique, h.nodeid, 0u32)),
                opcode::FUSE_INTERRUPT => {
                    let target = u64::from_ne_bytes(rest[..8].try_into().unwrap());
                    if let Some(i) = held_slow.iter().position(|x| x.0 == target) {
                        held_slow[i].2 += 1;
                        if held_slow[i].1 == 2 && held_slow[i].2 == 1 {
                            send_err(h.unique, -(Errno::EAGAIN.raw()));
                        } else {
                            let (u, _, _) = held_slow.remove(i);
                            send_err(u, -(Errno::EINTR.raw()));
                        }
                    }
                }
                opcode::FUSE_RELEASE => {
                    held.push(h.unique);
                    most2.record(held.len());
                }
                9999 => {
                    for u in held.drain(..) {
                        send(u, &[]);
                    }
                    send(h.unique, &[]);
                }
                _ => {}
            }
        });
        (Conn::socket(mine).unwrap(), seen, most)
    }

    /// The largest value recorded.
    #[derive(Default)]
    struct AtomicUsizeMax(std::sync::atomic::AtomicUsize);

    impl AtomicUsizeMax {
        fn record(&self, v: usize) {
            // Relaxed: a test statistic read after the server's replies were seen.
            self.0.fetch_max(v, std::sync::atomic::Ordering::Relaxed);
        }
        fn get(&self) -> usize {
            // Relaxed: as above.
            self.0.load(std::sync::atomic::Ordering::Relaxed)
        }
    }

    /// The opcodes seen so far after INIT.
    fn ops(seen: &Seen) -> Vec<u32> {
        plock(seen).iter().skip(1).map(|s| s.0).collect()
    }

    #[test]
    fn background_requests_are_capped_at_max_background() {
        let (c, seen, most) = recording_server();
        assert_eq!(c.negotiated().max_background, 2);
        for fh in 0..5u64 {
            let arg = crate::fuse::abi::ReleaseIn {
                fh,
                ..Default::default()
            };
            c.request_background(opcode::FUSE_RELEASE, 7, ROOT, &[arg.as_bytes()])
                .unwrap();
        }
        // A foreground request is not held back by the background queue, and (the socket
        // keeps order) the server had seen only the first 2 RELEASEs before it.
        c.request(opcode::FUSE_GETATTR, 1, ROOT, &[&[0u8; 16]])
            .unwrap();
        let r = opcode::FUSE_RELEASE;
        assert_eq!(ops(&seen), [r, r, opcode::FUSE_GETATTR]);
        // Each answer lets the next one go: all 5 arrive, never more than 2 in flight.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while ops(&seen).iter().filter(|&&o| o == r).count() < 5 {
            assert!(std::time::Instant::now() < deadline, "{:?}", ops(&seen));
            c.request(9999, 1, ROOT, &[]).unwrap();
        }
        assert_eq!(most.get(), 2);
        // The released file handles went out in order.
        let fhs: Vec<u64> = plock(&seen)
            .iter()
            .filter(|s| s.0 == r)
            .map(|s| u64::from_ne_bytes(s.2[..8].try_into().unwrap()))
            .collect();
        assert_eq!(fhs, [0, 1, 2, 3, 4]);
    }

    /// Leader/follower (leader.rs): a caller receives its own reply instead of being woken
    /// by the reader thread (with one reader thread, every reply went through it); with
    /// several callers at once, every one is answered (followers are handed the receive
    /// side) and the reader thread stays out of the way while they are busy.
    #[test]
    fn callers_receive_their_own_replies() {
        let (c, _, _) = recording_server();
        // Relaxed: a test counter, read after the requests it counts returned.
        let by_reader = || c.stats.by_reader.load(std::sync::atomic::Ordering::Relaxed);
        // The replies to `threads` callers' 300 GETATTRs each that the reader thread acted on.
        let through_reader = |threads: usize| {
            let before = by_reader();
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(|| {
                        for _ in 0..300 {
                            c.request(opcode::FUSE_GETATTR, 1, ROOT, &[&[0u8; 16]])
                                .unwrap();
                        }
                    });
                }
            });
            by_reader() - before
        };
        let one = through_reader(1);
        // The reader thread leads only after the connection was idle for 5 ms (with one
        // reader thread: all 300; a loaded machine may stall the caller that long).
        assert!(
            one <= 75,
            "{one} of 300 replies went through the reader thread"
        );
        let four = through_reader(4);
        assert!(
            four <= 300,
            "{four} of 1200 replies went through the reader thread"
        );
    }

    #[test]
    fn forgets_are_batched() {
        let (c, seen, _) = recording_server();
        for id in 10..10 + super::super::conn::FORGET_BATCH as u64 + 4 {
            c.forget(id, id);
        }
        // The 16th forget sent a batch of 16; the other 4 go before the next request.
        c.request(opcode::FUSE_GETATTR, 1, ROOT, &[&[0u8; 16]])
            .unwrap();
        let b = opcode::FUSE_BATCH_FORGET;
        assert_eq!(ops(&seen), [b, b, opcode::FUSE_GETATTR]);
        let batches: Vec<Vec<(u64, u64)>> = plock(&seen)
            .iter()
            .filter(|s| s.0 == b)
            .map(|s| {
                let (h, rest) = crate::fuse::abi::BatchForgetIn::read_from_prefix(&s.2).unwrap();
                assert_eq!(s.1, 0, "BATCH_FORGET's node id");
                let ones = <[crate::fuse::abi::ForgetOne]>::ref_from_bytes(rest).unwrap();
                assert_eq!(ones.len(), h.count as usize);
                ones.iter().map(|o| (o.nodeid, o.nlookup)).collect()
            })
            .collect();
        assert_eq!(batches[0], (10..26).map(|i| (i, i)).collect::<Vec<_>>());
        assert_eq!(batches[1], (26..30).map(|i| (i, i)).collect::<Vec<_>>());
        // One queued forget goes as a FORGET, at unmount's flush.
        c.forget(99, 3);
        c.flush_forgets();
        c.request(opcode::FUSE_GETATTR, 1, ROOT, &[&[0u8; 16]])
            .unwrap();
        let last = {
            let v = plock(&seen);
            v[v.len() - 2].clone()
        };
        assert_eq!(
            (last.0, last.1, last.2),
            (opcode::FUSE_FORGET, 99, 3u64.to_ne_bytes().to_vec())
        );
    }

    /// An eviction's FORGET never blocks on a full socket (it may run on a receiver, which
    /// must not wait for a server that waits for it): with the server stopped inside a
    /// request, 1 000 000 forgets (16 MiB of BATCH_FORGETs, far past the socket's buffer)
    /// return at once, each a push once the socket is full; what did not fit is sent before the next request, in order and
    /// none lost, in BATCH_FORGETs of at most FORGET_MAX. Before, the 16th forget after
    /// the socket filled blocked until the server read again.
    #[test]
    fn a_forget_never_blocks_on_a_full_socket() {
        use super::super::conn::FORGET_MAX;
        use crate::fuse::abi::{BatchForgetIn, ForgetIn, ForgetOne};
        let (mine, theirs) = seqpacket_pair();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let (entered_tx, entered_rx) = std::sync::mpsc::channel::<()>();
        // (nodeid, nlookup) of every forget, in the order the server read them; the size
        // of the largest BATCH_FORGET.
        let got = std::sync::Arc::new(std::sync::Mutex::new((Vec::<(u64, u64)>::new(), 0)));
        let got2 = got.clone();
        serve(theirs, 0, move |h, rest, theirs| match h.opcode {
            // Node 77: the server stops reading until the test says.
            opcode::FUSE_GETATTR if h.nodeid == 77 => {
                entered_tx.send(()).unwrap();
                let _ = stop_rx.recv();
                send_out(theirs, h.unique, 0, &[]);
            }
            opcode::FUSE_GETATTR => send_out(theirs, h.unique, 0, &[]),
            opcode::FUSE_FORGET => {
                let (f, _) = ForgetIn::read_from_prefix(rest).unwrap();
                got2.lock().unwrap().0.push((h.nodeid, f.nlookup));
            }
            opcode::FUSE_BATCH_FORGET => {
                let (b, ones) = BatchForgetIn::read_from_prefix(rest).unwrap();
                let ones = <[ForgetOne]>::ref_from_bytes(ones).unwrap();
                assert_eq!(ones.len(), b.count as usize);
                let mut g = got2.lock().unwrap();
                g.0.extend(ones.iter().map(|o| (o.nodeid, o.nlookup)));
                g.1 = g.1.max(ones.len());
            }
            _ => {}
        });
        let c = Conn::socket(mine).unwrap();
        let c2 = c.clone();
        let stopped =
            std::thread::spawn(move || c2.request(opcode::FUSE_GETATTR, 77, ROOT, &[&[0u8; 16]]));
        // Until the server is inside node 77's GETATTR (then it reads nothing more).
        entered_rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .unwrap();
        // 16 MiB of BATCH_FORGETs; a retry of the whole queue at every eviction (quadratic)
        // took 27 s for 400 000 here.
        const N: u64 = 1_000_000;
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let c3 = c.clone();
        let forgetter = std::thread::spawn(move || {
            for id in 1..=N {
                c3.forget(id, id % 7 + 1);
            }
            done_tx.send(()).unwrap();
        });
        let returned = done_rx.recv_timeout(std::time::Duration::from_secs(20));
        stop_tx.send(()).unwrap();
        forgetter.join().unwrap();
        assert!(returned.is_ok(), "forget blocked on the full socket");
        stopped.join().unwrap().unwrap();
        // The rest goes before this request.
        c.request(opcode::FUSE_GETATTR, 1, ROOT, &[&[0u8; 16]])
            .unwrap();
        let g = got.lock().unwrap();
        let want: Vec<(u64, u64)> = (1..=N).map(|id| (id, id % 7 + 1)).collect();
        assert_eq!(g.0.len(), want.len(), "forgets lost or repeated");
        assert!(g.0 == want, "forgets out of order");
        assert!(g.1 <= FORGET_MAX, "a BATCH_FORGET of {}", g.1);
    }

    #[test]
    fn an_unanswered_request_times_out_and_aborts() {
        let (c, _seen, _) = recording_server();
        c.set_timeout(std::time::Duration::from_millis(200));
        // Answered in time: no effect.
        c.request(opcode::FUSE_GETATTR, 1, ROOT, &[&[0u8; 16]])
            .unwrap();
        // The server ignores opcode 9998.
        let t = std::time::Instant::now();
        assert_eq!(
            c.request(9998, 1, ROOT, &[]).unwrap_err(),
            Errno::ECONNABORTED
        );
        assert!(t.elapsed() >= std::time::Duration::from_millis(200));
        assert_eq!(
            c.request(opcode::FUSE_GETATTR, 1, ROOT, &[&[0u8; 16]])
                .unwrap_err(),
            Errno::ENOTCONN
        );
        use crate::sync::plain::Ordering;
        // Relaxed: a diagnostic counter, read after the abort.
        assert_eq!(c.stats.timeouts.load(Ordering::Relaxed), 1);
    }

    /// A signal (a handler installed, even SA_RESTART: poll(2) is never restarted) that
    /// reaches a leader blocked in its bounded receive is not a request timeout (a
    /// reviewer's test: the first leader/follower code aborted the connection).
    #[test]
    fn a_signal_to_a_leader_is_no_timeout() {
        extern "C" fn h(_: libc::c_int) {}
        // SAFETY: a handler that does nothing, installed once for SIGUSR1.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = h as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
        }
        let (c, seen, _) = recording_server();
        c.set_timeout(std::time::Duration::from_secs(10));
        let (tx, rx) = std::sync::mpsc::channel();
        let c2 = c.clone();
        // A foreground RELEASE: the server holds it until 9999.
        let t = std::thread::spawn(move || {
            // SAFETY: plain call.
            tx.send(unsafe { libc::pthread_self() } as usize).unwrap();
            c2.request(opcode::FUSE_RELEASE, 1, ROOT, &[&[0u8; 24]])
        });
        let tid = rx.recv().unwrap();
        while !plock(&seen).iter().any(|s| s.0 == opcode::FUSE_RELEASE) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        // SAFETY: the thread is alive (it waits for its reply).
        unsafe { libc::pthread_kill(tid as libc::pthread_t, libc::SIGUSR1) };
        std::thread::sleep(std::time::Duration::from_millis(50));
        let r = c.request(9999, 1, ROOT, &[]);
        let t = t.join().unwrap();
        use crate::sync::plain::Ordering;
        // Relaxed: a diagnostic counter.
        let timeouts = c.stats.timeouts.load(Ordering::Relaxed);
        assert_eq!((t.map(drop), r.map(drop), timeouts), (Ok(()), Ok(()), 0));
    }

    /// A notification the server sends while it holds a caller's request is applied soon,
    /// even when the reader thread was polling the idle socket as the caller took the
    /// lead (a reviewer's test: 19 of 20 late before the reader's eventfd).
    #[test]
    fn a_notification_during_a_held_request_is_applied() {
        let mut late = 0;
        for _ in 0..20 {
            let (mine, theirs) = seqpacket_pair();
            let mut held = Vec::new();
            serve(theirs, 0, move |h, _, theirs| {
                let send = |unique: u64, error: i32, payload: &[u8]| {
                    send_out(theirs, unique, error, payload)
                };
                match h.opcode {
                    9996 => {
                        send(0, crate::fuse::abi::notify::INVAL_INODE, &[0u8; 24]);
                        held.push(h.unique);
                    }
                    9999 => {
                        for u in held.drain(..) {
                            send(u, 0, &[]);
                        }
                        send(h.unique, 0, &[]);
                    }
                    _ => {}
                }
            });
            let c = Conn::socket(mine).unwrap();
            let applied = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let a2 = applied.clone();
            c.set_notify(Box::new(move |_, _| {
                // SeqCst: a test flag polled by the test thread; any ordering would do.
                a2.store(true, std::sync::atomic::Ordering::SeqCst)
            }));
            // The reader thread is idle: it polls the socket.
            std::thread::sleep(std::time::Duration::from_millis(20));
            let c2 = c.clone();
            let t = std::thread::spawn(move || c2.request(9996, 1, ROOT, &[]));
            let t0 = std::time::Instant::now();
            // SeqCst: as the store's.
            while !applied.load(std::sync::atomic::Ordering::SeqCst)
                && t0.elapsed() < std::time::Duration::from_millis(300)
            {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            // SeqCst: as the store's.
            if !applied.load(std::sync::atomic::Ordering::SeqCst) {
                late += 1;
            }
            c.request(9999, 1, ROOT, &[]).unwrap();
            t.join().unwrap().unwrap();
        }
        assert_eq!(late, 0, "notifications not applied within 300 ms, of 20");
    }

    #[test]
    fn an_interrupter_interrupts_the_request_its_thread_waits_for() {
        use super::super::interrupt::Interrupter;
        let (c, seen, _) = recording_server();
        // A lost interrupt fails the test (ECONNABORTED) instead of hanging it.
        c.set_timeout(std::time::Duration::from_secs(10));
        for nodeid in [1u64, 2] {
            let (tx, rx) = std::sync::mpsc::channel();
            let c2 = c.clone();
            let t = std::thread::spawn(move || {
                tx.send(Interrupter::current()).unwrap();
                c2.request(9997, nodeid, ROOT, &[])
            });
            let intr = rx.recv().unwrap();
            // Interrupt once the server holds the request (it would be pending otherwise,
            // which the next case checks).
            while !plock(&seen).iter().any(|s| s.0 == 9997 && s.1 == nodeid) {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            intr.interrupt();
            assert_eq!(t.join().unwrap(), Err(Errno::EINTR), "nodeid {nodeid}");
        }
        // The interrupts carried the request's unique (| 1 as theirs); the one answered
        // EAGAIN went again.
        let msgs: Vec<(u32, u64)> = plock(&seen).iter().map(|s| (s.0, s.1)).collect();
        let n = msgs
            .iter()
            .filter(|m| m.0 == opcode::FUSE_INTERRUPT)
            .count();
        assert_eq!(n, 3, "{msgs:?}");
        // An interrupt with nothing in flight is pending: the next request is interrupted
        // as soon as it is sent.
        let c2 = c.clone();
        let r = std::thread::spawn(move || {
            Interrupter::current().interrupt();
            c2.request(9997, 1, ROOT, &[])
        })
        .join()
        .unwrap();
        assert_eq!(r, Err(Errno::EINTR));
        // A thread without an interrupter is never interrupted, and its requests work.
        c.request(opcode::FUSE_GETATTR, 1, ROOT, &[&[0u8; 16]])
            .unwrap();
    }

    /// A FUSE server's worker keeps an interrupt pending until the request it serves ends
    /// (`Interrupter::keep_pending`, `cancel_pending`), as a signal stays pending until the
    /// system call returns: after a request the server answered although interrupted (a
    /// walk's first step), the next one is interrupted as it is sent. Found by the
    /// mount_interrupt test once the walk sent a GETATTR before its hanging LOOKUP: the
    /// interrupt went to the GETATTR and the LOOKUP hung for good. (Without `keep_pending`
    /// the next request alone takes it: `an_interrupter_interrupts_the_request_...`.)
    #[test]
    fn a_kept_interrupt_interrupts_every_request_until_cancelled() {
        use super::super::interrupt::Interrupter;
        let (c, _seen, _) = recording_server();
        c.set_timeout(std::time::Duration::from_secs(10));
        let getattr = |c: &Conn| c.request(opcode::FUSE_GETATTR, 1, ROOT, &[&[0u8; 16]]);
        let c2 = c.clone();
        let r = std::thread::spawn(move || {
            let i = Interrupter::current();
            i.keep_pending();
            i.interrupt();
            // Answered although interrupted; the hanging one still is interrupted.
            let first = getattr(&c2).map(drop);
            let second = c2.request(9997, 1, ROOT, &[]);
            i.cancel_pending();
            (first, second, getattr(&c2).map(drop))
        })
        .join()
        .unwrap();
        assert_eq!(r, (Ok(()), Err(Errno::EINTR), Ok(())));
    }

    /// An EAGAIN for an interrupt never sent (a hostile server) does not link the request:
    /// `request_end`'s fast path would free it while linked. The request completes, and
    /// the next interrupt list read finds nothing.
    #[test]
    fn a_forged_interrupt_eagain_links_nothing() {
        let (c, _seen, _) = recording_server();
        let unique = 1000u64;
        let p = Request::alloc(unique, 1);
        c.shard_insert_for_test(unique, p);
        c.interrupt_reply(unique | 1, Some(Errno::EAGAIN));
        assert!(c.iq_read_interrupt_for_test().is_none());
        assert!(c.complete_for_test(unique));
    }
}

/// The page cache (fs.rs, cache.rs) against a scripted server of one file, `/f` (node 2),
/// whose data the test changes behind the client's back; READs are counted.
#[cfg(not(uvfs_loom))]
mod page_cache {
    use super::super::fs::{mount, FuseClientOptions, FuseServer};
    use crate::fuse::abi::{self, fattr, fopen, init, opcode};
    use crate::sync::plain::Mutex;
    use crate::sync::plock;
    use crate::types::{OpenFlags, S_IFDIR, S_IFREG};
    use crate::{Errno, Fd, Task};
    use std::sync::Arc;
    use zerocopy::{FromBytes, IntoBytes};

    const PS: usize = crate::inode::PAGE_SIZE;

    /// The server's file and what it was asked.
    #[derive(Default)]
    struct File {
        data: Vec<u8>,
        mtime: u64,
        /// `open_flags` of every OPEN reply.
        open_flags: u32,
        /// `attr_valid` (seconds) of every attribute and entry reply.
        attr_valid: u64,
        /// READ requests seen.
        reads: usize,
    }

    struct Server {
        file: Arc<Mutex<File>>,
        /// The server's end, for notifications.
        sock: super::super::scripted::ServerEnd,
        task: Task,
        /// Names looked up to wait for the reader thread (see `notify_inval`).
        n: crate::sync::plain::AtomicU32,
    }

    fn attr(nodeid: u64, f: &File) -> abi::Attr {
        let (mode, size) = if nodeid == 1 {
            (S_IFDIR | 0o755, 0)
        } else {
            (S_IFREG | 0o666, f.data.len() as u64)
        };
        abi::Attr {
            ino: nodeid,
            size,
            mode,
            nlink: 1,
            mtime: f.mtime,
            ..Default::default()
        }
    }

    /// Mounts the scripted server (`auto_inval`: it accepts `FUSE_AUTO_INVAL_DATA`).
    fn server(data: Vec<u8>, auto_inval: bool) -> Server {
        let file = Arc::new(Mutex::new(File {
            data,
            mtime: 1,
            attr_valid: 3600,
            ..Default::default()
        }));
        let f2 = file.clone();
        let ends = super::super::scripted::spawn(2 << 20, move |h, rest, send| {
            let mut f = plock(&f2);
            let valid = f.attr_valid;
            match h.opcode {
                opcode::FUSE_INIT => {
                    let out = abi::InitOut {
                        major: 7,
                        minor: 31,
                        max_write: 1 << 20,
                        flags: if auto_inval {
                            init::FUSE_AUTO_INVAL_DATA as u32
                        } else {
                            0
                        },
                        ..Default::default()
                    };
                    send(h.unique, 0, out.as_bytes());
                }
                opcode::FUSE_GETATTR => {
                    let out = abi::AttrOut {
                        attr_valid: valid,
                        attr: attr(h.nodeid, &f),
                        ..Default::default()
                    };
                    send(h.unique, 0, out.as_bytes());
                }
                opcode::FUSE_LOOKUP if h.nodeid == 1 && rest == b"f\0" => {
                    let out = abi::EntryOut {
                        nodeid: 2,
                        entry_valid: 3600,
                        attr_valid: valid,
                        attr: attr(2, &f),
                        ..Default::default()
                    };
                    send(h.unique, 0, out.as_bytes());
                }
                opcode::FUSE_LOOKUP => send(h.unique, -Errno::ENOENT.raw(), &[]),
                opcode::FUSE_OPEN => {
                    let out = abi::OpenOut {
                        fh: 7,
                        open_flags: f.open_flags,
                        padding: 0,
                    };
                    send(h.unique, 0, out.as_bytes());
                }
                opcode::FUSE_READ => {
                    f.reads += 1;
                    let (r, _) = abi::ReadIn::read_from_prefix(rest).unwrap();
                    assert_eq!(r.fh, 7, "the server's handle");
                    let from = (r.offset as usize).min(f.data.len());
                    let to = (from + r.size as usize).min(f.data.len());
                    send(h.unique, 0, &f.data[from..to]);
                }
                opcode::FUSE_WRITE => {
                    let (w, data) = abi::WriteIn::read_from_prefix(rest).unwrap();
                    let (off, len) = (w.offset as usize, w.size as usize);
                    if f.data.len() < off + len {
                        f.data.resize(off + len, 0);
                    }
                    f.data[off..off + len].copy_from_slice(&data[..len]);
                    f.mtime += 1;
                    let out = abi::WriteOut {
                        size: w.size,
                        padding: 0,
                    };
                    send(h.unique, 0, out.as_bytes());
                }
                opcode::FUSE_SETATTR => {
                    let (s, _) = abi::SetattrIn::read_from_prefix(rest).unwrap();
                    if s.valid & fattr::FATTR_SIZE != 0 {
                        f.data.resize(s.size as usize, 0);
                        f.mtime += 1;
                    }
                    let out = abi::AttrOut {
                        attr_valid: valid,
                        attr: attr(h.nodeid, &f),
                        ..Default::default()
                    };
                    send(h.unique, 0, out.as_bytes());
                }
                opcode::FUSE_FLUSH | opcode::FUSE_RELEASE => send(h.unique, 0, &[]),
                opcode::FUSE_FORGET | opcode::FUSE_BATCH_FORGET | opcode::FUSE_DESTROY => {}
                _ => send(h.unique, -Errno::ENOSYS.raw(), &[]),
            }
        });
        let opts = FuseClientOptions {
            cache_pages: Some(64),
            ..Default::default()
        };
        let m = mount(FuseServer::Socket(ends.client), opts).unwrap();
        Server {
            file,
            sock: ends.server,
            task: Task::init(&m),
            n: Default::default(),
        }
    }

    impl Server {
        fn reads(&self) -> usize {
            plock(&self.file).reads
        }

        /// Changes the server's bytes `[off, off + bytes.len())` behind the client's back
        /// (`mtime` moves with them only if `touch`).
        fn change(&self, off: usize, bytes: &[u8], touch: bool) {
            let mut f = plock(&self.file);
            if f.data.len() < off + bytes.len() {
                f.data.resize(off + bytes.len(), 0);
            }
            f.data[off..off + bytes.len()].copy_from_slice(bytes);
            if touch {
                f.mtime += 1;
            }
        }

        fn open(&self, flags: OpenFlags) -> Fd {
            self.task.open("/f", flags, 0).unwrap()
        }

        fn pread(&self, fd: Fd, len: usize, off: usize) -> Vec<u8> {
            let mut b = vec![0u8; len];
            let n = self.task.pread(fd, &mut b, off as i64).unwrap();
            b.truncate(n);
            b
        }

        /// NOTIFY_INVAL_INODE of the file, then a round trip: the client's reader
        /// applies messages in order, so the notification is applied when it returns.
        fn notify_inval(&self, off: i64, len: i64) {
            let n = abi::NotifyInvalInodeOut { ino: 2, off, len };
            let h = abi::OutHeader {
                len: (16 + n.as_bytes().len()) as u32,
                error: abi::notify::INVAL_INODE,
                unique: 0,
            };
            let mut m = h.as_bytes().to_vec();
            m.extend_from_slice(n.as_bytes());
            rustix::net::send(&self.sock, &m, rustix::net::SendFlags::NOSIGNAL).unwrap();
            // Relaxed: a counter for unique names.
            let k = self.n.fetch_add(1, crate::sync::plain::Ordering::Relaxed);
            let name = format!("/sync{k}");
            assert_eq!(
                self.task.open(name.as_str(), OpenFlags::RDONLY, 0),
                Err(Errno::ENOENT)
            );
        }
    }

    /// Bytes `i % 251` of a file of `len` bytes.
    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn repeated_reads_hit_the_cache() {
        let data = pattern(3 * PS + 100);
        let s = server(data.clone(), false);
        let fd = s.open(OpenFlags::RDONLY);
        for _ in 0..3 {
            assert_eq!(s.pread(fd, PS, 0), &data[..PS]);
        }
        // The miss read ahead to the end of the file (4 pages, one READ).
        assert_eq!(
            s.pread(fd, PS, 2 * PS + 50),
            &data[2 * PS + 50..3 * PS + 50]
        );
        assert_eq!(s.pread(fd, 100, 3 * PS), &data[3 * PS..]);
        assert_eq!(s.pread(fd, 10, data.len()), b"", "at the end of file");
        assert_eq!(s.reads(), 1);
        // A second file of the same inode shares the pages while it is open.
        let fd2 = s.open(OpenFlags::RDONLY);
        assert_eq!(s.reads(), 1);
        s.task.close(fd2).unwrap();
        s.task.close(fd).unwrap();
    }

    #[test]
    fn keep_cache_keeps_pages_across_opens_and_its_absence_drops_them() {
        let data = pattern(2 * PS);
        let s = server(data.clone(), false);
        // Without FOPEN_KEEP_CACHE: every open drops the pages; a change the server
        // made meanwhile (same size, same mtime) is seen.
        let fd = s.open(OpenFlags::RDONLY);
        assert_eq!(s.pread(fd, PS, 0), &data[..PS]);
        s.task.close(fd).unwrap();
        s.change(0, b"changed", false);
        let fd = s.open(OpenFlags::RDONLY);
        assert_eq!(&s.pread(fd, 7, 0), b"changed");
        assert_eq!(s.reads(), 2);
        s.task.close(fd).unwrap();
        // With it, the pages stay: the next change is not seen (as on Linux, until an
        // invalidation), and no READ is sent.
        plock(&s.file).open_flags = fopen::FOPEN_KEEP_CACHE;
        let fd = s.open(OpenFlags::RDONLY);
        assert_eq!(&s.pread(fd, 7, 0), b"changed", "cached before the open");
        s.task.close(fd).unwrap();
        s.change(0, b"again!!", false);
        let fd = s.open(OpenFlags::RDONLY);
        assert_eq!(&s.pread(fd, 7, 0), b"changed", "kept");
        assert_eq!(s.reads(), 2);
        s.task.close(fd).unwrap();
        // An open without KEEP_CACHE drops them again.
        plock(&s.file).open_flags = 0;
        let fd = s.open(OpenFlags::RDONLY);
        assert_eq!(&s.pread(fd, 7, 0), b"again!!");
        assert_eq!(s.reads(), 3);
        s.task.close(fd).unwrap();
    }

    #[test]
    fn notify_inval_inode_drops_the_range_or_the_file() {
        let data = pattern(3 * PS);
        let s = server(data.clone(), false);
        let fd = s.open(OpenFlags::RDONLY);
        assert_eq!(s.pread(fd, 3 * PS, 0), data);
        s.change(0, b"zero", false);
        s.change(PS, b"one!", false);
        s.change(2 * PS, b"two!", false);
        assert_eq!(s.pread(fd, 4, PS), &data[PS..PS + 4], "cached");
        // The second page only.
        s.notify_inval(PS as i64, PS as i64);
        assert_eq!(s.pread(fd, 4, PS), b"one!");
        assert_eq!(s.pread(fd, 4, 0), &data[..4], "the first page stays");
        assert_eq!(s.reads(), 2);
        // An offset < 0: the attributes only.
        s.notify_inval(-1, 0);
        assert_eq!(s.pread(fd, 4, 0), &data[..4]);
        // Length 0: from the offset to the end.
        s.notify_inval(0, 0);
        assert_eq!(s.pread(fd, 4, 0), b"zero");
        assert_eq!(s.pread(fd, 4, 2 * PS), b"two!");
        s.task.close(fd).unwrap();
    }

    #[test]
    fn writes_then_reads_return_the_written_data() {
        let data = pattern(2 * PS);
        let s = server(data.clone(), false);
        let fd = s.open(OpenFlags::RDWR);
        assert_eq!(s.pread(fd, 2 * PS, 0), data);
        assert_eq!(s.task.pwrite(fd, b"hello", 100).unwrap(), 5);
        let mut want = data.clone();
        want[100..105].copy_from_slice(b"hello");
        assert_eq!(s.pread(fd, 2 * PS, 0), want);
        // Past the end, leaving a hole: the old last page now reads to the new size.
        assert_eq!(s.task.pwrite(fd, b"tail", 3 * PS as i64 + 10).unwrap(), 4);
        want.resize(3 * PS + 10, 0);
        want.extend_from_slice(b"tail");
        assert_eq!(s.pread(fd, 8 * PS, 0), want);
        assert_eq!(plock(&s.file).data, want, "written through");
        s.task.close(fd).unwrap();
    }

    #[test]
    fn truncate_then_read() {
        let data = pattern(3 * PS);
        let s = server(data.clone(), false);
        let fd = s.open(OpenFlags::RDWR);
        assert_eq!(s.pread(fd, 3 * PS, 0), data);
        s.task.ftruncate(fd, 10).unwrap();
        assert_eq!(s.pread(fd, PS, 0), &data[..10]);
        assert_eq!(s.pread(fd, PS, PS), b"");
        // Grown again: zeros past the 10 bytes, not the old cached bytes.
        s.task.ftruncate(fd, 2 * PS as i64).unwrap();
        let mut want = data[..10].to_vec();
        want.resize(2 * PS, 0);
        assert_eq!(s.pread(fd, 3 * PS, 0), want);
        s.task.close(fd).unwrap();
    }

    #[test]
    fn reads_past_eof_see_a_server_side_size_change_with_attr_timeout_0() {
        let data = pattern(PS + 10);
        let s = server(data.clone(), false);
        plock(&s.file).attr_valid = 0;
        let fd = s.open(OpenFlags::RDONLY);
        assert_eq!(s.pread(fd, 2 * PS, 0), data);
        // Grown behind the client's back: a read past the cached size asks GETATTR,
        // sees the new size, drops the pages and reads the new bytes.
        s.change(PS, b"0123456789abcdef", true);
        let mut want = data.clone();
        want[PS..PS + 10].copy_from_slice(b"0123456789");
        want.extend_from_slice(b"abcdef");
        assert_eq!(s.pread(fd, 2 * PS, 0), want);
        // Shrunk: the read is cut at the new size.
        plock(&s.file).data.truncate(100);
        assert_eq!(s.pread(fd, 2 * PS, 0), &want[..100]);
        s.task.close(fd).unwrap();
    }

    #[test]
    fn auto_inval_data_drops_pages_on_a_new_mtime() {
        let data = pattern(PS);
        let s = server(data.clone(), true);
        plock(&s.file).attr_valid = 0;
        let fd = s.open(OpenFlags::RDONLY);
        assert_eq!(s.pread(fd, PS, 0), data);
        // Same size, same mtime: the cache is used (a GETATTR each read: attr_valid 0).
        s.change(0, b"same", false);
        assert_eq!(s.pread(fd, 4, 0), &data[..4]);
        assert_eq!(s.reads(), 1);
        // A new mtime: dropped.
        s.change(0, b"new!", true);
        assert_eq!(s.pread(fd, 4, 0), b"new!");
        assert_eq!(s.reads(), 2);
        s.task.close(fd).unwrap();
    }

    #[test]
    fn direct_io_and_o_direct_bypass_the_cache() {
        let data = pattern(PS);
        let s = server(data.clone(), false);
        plock(&s.file).open_flags = fopen::FOPEN_DIRECT_IO | fopen::FOPEN_KEEP_CACHE;
        let fd = s.open(OpenFlags::RDONLY);
        assert_eq!(s.pread(fd, 10, 0), &data[..10]);
        assert_eq!(s.pread(fd, 10, 0), &data[..10]);
        assert_eq!(s.reads(), 2);
        s.task.close(fd).unwrap();
        plock(&s.file).open_flags = fopen::FOPEN_KEEP_CACHE;
        let fd = s.open(OpenFlags::RDONLY | OpenFlags::DIRECT);
        assert_eq!(s.pread(fd, 10, 0), &data[..10]);
        assert_eq!(s.pread(fd, 10, 0), &data[..10]);
        assert_eq!(s.reads(), 4);
        s.task.close(fd).unwrap();
    }

    /// Readers of one cached file racing a writer: every read returns, for each byte,
    /// either the old or the new value; once the writer is done, every read returns the
    /// new bytes (no stale page outlives the write).
    #[test]
    fn reads_racing_writes_leave_no_stale_page() {
        let s = server(vec![b'a'; 4 * PS], false);
        plock(&s.file).open_flags = fopen::FOPEN_KEEP_CACHE;
        let fd = s.open(OpenFlags::RDWR);
        for round in 0..20u8 {
            let new = b'b' + round;
            let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    // A child task: the same open file, a table of its own.
                    let (t, stop) = (s.task.fork(), stop.clone());
                    std::thread::spawn(move || {
                        let mut b = vec![0u8; 4 * PS];
                        // Relaxed: a test's stop flag.
                        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                            assert_eq!(t.pread(fd, &mut b, 0).unwrap(), 4 * PS);
                        }
                    })
                })
                .collect();
            s.task.pwrite(fd, &vec![new; 4 * PS], 0).unwrap();
            // Relaxed: as above; the joins order the rest.
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            for r in readers {
                r.join().unwrap();
            }
            assert!(
                s.pread(fd, 4 * PS, 0).iter().all(|&c| c == new),
                "round {round}"
            );
        }
        s.task.close(fd).unwrap();
    }
}
