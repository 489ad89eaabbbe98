//! A program on `uvfs mount` blocked in a request that waits for a FUSE server mounted
//! inside the namespace (`--fuse`) is interrupted by a signal, as on a kernel FUSE mount
//! whose server honours interrupts: a caught signal makes its call fail with `EINTR`, a
//! fatal one kills it, both at once; the mount keeps working and nothing is left behind.
//!
//! Bug: `uvfs mount` answered `FUSE_INTERRUPT` with `ENOSYS` (fuser 0.18's session, and
//! uvfs's own decoder), which turns interrupts off for the connection
//! (`fc->no_interrupt`, fs/fuse/dev.c); a request waiting for a hung inner server then held
//! its caller in `request_wait_answer` for good, even against SIGKILL (the request was
//! sent). Fix: the worker serving a request publishes it (fuse/serve_intr.rs) and an
//! interrupt reaches its FUSE client `Interrupter`, which sends `FUSE_INTERRUPT` to the
//! inner server; the request ends with that server's `EINTR`. Classic transport: uvfs's
//! own `/dev/fuse` loop (mounted by root, and by user 65534 through fusermount3); `--transport uring` (CI's second pass): the interrupt comes
//! on `/dev/fuse`, the request is served on a ring.
//!
//! The inner server (`data/hang_server.py`, raw FUSE over the client's socket) never
//! answers a LOOKUP of `slow` until it is interrupted, then answers it `EINTR`, as a
//! libfuse server that checks `fuse_req_interrupted` does.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::MountGuard;
use rustix::process::{kill_process, Pid, Signal};

/// How long an interrupted call may take to end (the inner round trips are
/// milliseconds; a lost interrupt never ends).
const PROMPT: Duration = Duration::from_secs(10);

/// `uvfs mount` with `data/hang_server.py` (run by `py`, logging to `log`) mounted at
/// `/sub` and `threads` server threads; `None` when the mount test is skipped.
fn mount_hang_server(test: &str, py: &Path, log: &Path, threads: &str) -> Option<MountGuard> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/hang_server.py");
    let spec = format!(
        "/sub={} {} {{}} {}",
        py.display(),
        script.display(),
        log.display()
    );
    MountGuard::mount(test, &["--fuse", &spec, "--threads", threads])
}

/// Waits until `log` has `n` lines starting with `prefix`.
fn wait_log(log: &Path, prefix: &str, n: usize) {
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.lines().filter(|l| l.starts_with(prefix)).count() >= n {
            return;
        }
        assert!(
            start.elapsed() < PROMPT,
            "no `{prefix}` in the inner server's log: {text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `child` up to [`PROMPT`]; a child still blocked is killed (it ends only when
/// the mount's connection goes, which the guard's drop does) and the test fails.
fn wait_prompt(mut child: std::process::Child, what: &str) -> std::process::Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > PROMPT {
            let _ = child.kill();
            panic!("{what}: still blocked {PROMPT:?} after the signal (interrupt lost)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_signal_ends_a_request_blocked_in_an_inner_fuse_server() {
    let test = "a_signal_ends_a_request_blocked_in_an_inner_fuse_server";
    if !common::uvfs_only(test) {
        return;
    }
    let Some(py) = common::find_in_path("python3") else {
        common::skip(
            test,
            "python3 not found (the inner FUSE server is a Python script)",
        );
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("inner.log");
    let Some(m) = mount_hang_server(test, &py, &log, "2") else {
        return;
    };
    let slow = m.path().join("sub/slow");
    // The server's descriptors once the inner mount is up.
    assert!(
        matches!(std::fs::metadata(m.path().join("sub/fast")), Err(e) if e.raw_os_error() == Some(libc_enoent()))
    );
    let pid = m.server_pid().unwrap();
    let fds = common::fd_count(pid);

    // A caught signal: the call fails with EINTR (Python raises from the handler only once
    // the call has returned; a call the kernel still waits in would not let it run).
    let caught = Command::new(&py)
        .arg("-c")
        .arg(
            "import os, signal, sys\n\
             def h(*a): raise InterruptedError('alarm')\n\
             signal.signal(signal.SIGALRM, h)\n\
             signal.alarm(1)\n\
             try:\n    os.stat(sys.argv[1]); print('returned')\n\
             except InterruptedError: print('interrupted')\n\
             except OSError as e: print('error', e.errno)\n",
        )
        .arg(&slow)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    wait_log(&log, "hung", 1);
    let out = wait_prompt(caught, "stat with a SIGALRM handler");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "interrupted");
    wait_log(&log, "answered", 1);

    // Fatal signals: the program dies of them.
    for (n, sig) in [(2, Signal::INT), (3, Signal::KILL)] {
        let child = Command::new("stat")
            .arg(&slow)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_log(&log, "hung", n);
        kill_process(Pid::from_child(&child), sig).unwrap();
        let out = wait_prompt(child, &format!("stat killed by {sig:?}"));
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(sig.as_raw()), "{:?}", out.status);
        wait_log(&log, "answered", n);
    }

    // Every hung request was answered, once; the mount and the inner server still work, and
    // the server holds no more descriptors than before.
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.lines()
            .filter(|l| l.starts_with("answered"))
            .all(|l| l.ends_with("still hung 0")),
        "{text}"
    );
    assert!(
        matches!(std::fs::metadata(m.path().join("sub/fast")), Err(e) if e.raw_os_error() == Some(libc_enoent()))
    );
    std::fs::write(m.path().join("f"), b"after").unwrap();
    assert_eq!(std::fs::read(m.path().join("f")).unwrap(), b"after");
    assert_eq!(common::fd_count(pid), fds, "the server's descriptors");

    // The inner server killed: its PATH fails with ENOTCONN, uvfs says so in one line
    // within a second or so (issue 11: it said nothing), the rest of the mount goes on.
    let inner = inner_server_pid(pid).expect("the inner server, a child of uvfs mount");
    kill_process(Pid::from_raw(inner as i32).unwrap(), Signal::KILL).unwrap();
    let said =
        "closed the connection; the process uvfs started was killed by signal 9: /sub now fails \
                with ENOTCONN";
    let start = Instant::now();
    while !m.server_log().contains(said) {
        assert!(start.elapsed() < PROMPT, "not said: {}", m.server_log());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        // A name not looked up before (the kernel cached `fast`'s ENOENT).
        matches!(std::fs::metadata(m.path().join("sub/new")), Err(e) if e.raw_os_error() == Some(107)),
        "ENOTCONN"
    );
    assert_eq!(std::fs::read(m.path().join("f")).unwrap(), b"after");
    m.unmount();
}

/// The pid of the child of process `parent` that runs `hang_server.py`.
fn inner_server_pid(parent: u32) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        // The fields after the command name, whose parentheses may hold anything.
        let rest = &stat[stat.rfind(')')? + 2..];
        let ppid: u32 = rest.split(' ').nth(1)?.parse().ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        let runs = String::from_utf8_lossy(&cmd).contains("hang_server.py");
        (ppid == parent && runs).then_some(pid)
    })
}

/// Bug (reviewer, `--transport uring`): a ring worker serves what one `io_uring_enter`
/// fetched one request after another, and the kernel marks each sent when it puts it in
/// an entry. A request `B` behind `A` (which blocks in the inner server) in one worker's
/// batch had its interrupt dropped (the worker was "serving `A`"; other slots moved on, or
/// 2 s passed); when `A` ended, `B` was served without it and its caller, killed, stayed
/// in the kernel for good (a sent request waits for its answer). Fix: a ring worker's slot
/// holds such an interrupt until it read again (`fuse/serve_intr.rs`, "Batches"); `B`
/// starts interrupted. Forcing the batch: the callers run on CPU 0 (queue 0, one worker);
/// `C` blocks that worker, then `A` and `B` wait in two of its entries (the kernel copies
/// them in the worker's task work, which runs only when it enters again); killing `C`
/// lets the worker fetch both at once. Over `/dev/fuse` (four readers: one is left to read
/// interrupts) each request has its own reader: the test holds there too.
#[test]
fn a_request_behind_a_blocked_one_on_a_ring_gets_its_interrupt() {
    let test = "a_request_behind_a_blocked_one_on_a_ring_gets_its_interrupt";
    if !common::uvfs_only(test) {
        return;
    }
    let (Some(py), Some(taskset)) = (
        common::find_in_path("python3"),
        common::find_in_path("taskset"),
    ) else {
        common::skip(test, "python3 or taskset not found");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("inner.log");
    let Some(m) = mount_hang_server(test, &py, &log, "4") else {
        return;
    };
    assert!(
        matches!(std::fs::metadata(m.path().join("sub/fast")), Err(e) if e.raw_os_error() == Some(libc_enoent()))
    );
    let on_cpu0 = |name: &str| {
        Command::new(&taskset)
            .args(["-c", "0", "stat"])
            .arg(m.path().join("sub").join(name))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let hung = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.strip_prefix("hung "))
            .map(|l| l.split_once(' ').unwrap().1.to_owned())
            .collect::<Vec<_>>()
    };
    let c = on_cpu0("slow_c");
    wait_log(&log, "hung", 1);
    let a = on_cpu0("slow_a");
    std::thread::sleep(Duration::from_millis(300));
    let b = on_cpu0("slow_b");
    std::thread::sleep(Duration::from_millis(300));
    if common::uring_requested() {
        // The ring's worker is blocked in `C`: `A` and `B` wait in its entries.
        assert_eq!(hung(), ["slow_c"], "the requests went to another worker");
    }
    kill_process(Pid::from_child(&c), Signal::KILL).unwrap();
    wait_prompt(c, "stat slow_c killed");
    wait_log(&log, "answered", 1);
    wait_log(&log, "hung", 2);
    // The one served now blocks; the other waits behind it (on the ring: sent).
    let (first, behind) = if hung()[1] == "slow_a" {
        (a, b)
    } else {
        (b, a)
    };
    kill_process(Pid::from_child(&behind), Signal::KILL).unwrap();
    // Past PENDING_TTL, and another worker's requests sweep the pending interrupts.
    std::thread::sleep(Duration::from_millis(2500));
    for i in 0..3 {
        let _ = Command::new(&taskset)
            .args(["-c", "1", "stat"])
            .arg(m.path().join(format!("none{i}")))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    kill_process(Pid::from_child(&first), Signal::KILL).unwrap();
    let out = wait_prompt(first, "the blocked stat killed");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(Signal::KILL.as_raw()));
    let out = wait_prompt(behind, "the stat behind it killed");
    assert_eq!(out.status.signal(), Some(Signal::KILL.as_raw()));
    // Every request the inner server got was answered, once.
    let text = std::fs::read_to_string(&log).unwrap();
    let count = |p: &str| text.lines().filter(|l| l.starts_with(p)).count();
    assert_eq!(count("answered"), count("hung"), "{text}");
    assert!(
        text.lines()
            .rev()
            .find(|l| l.starts_with("answered"))
            .is_some_and(|l| l.ends_with("still hung 0")),
        "{text}"
    );
    std::fs::write(m.path().join("f"), b"after").unwrap();
    assert_eq!(std::fs::read(m.path().join("f")).unwrap(), b"after");
    m.unmount();
}

/// `ENOENT`'s number.
fn libc_enoent() -> i32 {
    rustix::io::Errno::NOENT.raw_os_error()
}

/// Stops a mount made by [`an_unprivileged_mount_answers_interrupts`] however the test ends.
struct UserMount {
    dir: PathBuf,
    server: Option<std::process::Child>,
}

impl Drop for UserMount {
    fn drop(&mut self) {
        if let Some(mut s) = self.server.take() {
            let _ = s.kill();
            let _ = s.wait();
        }
        if common::mount_at(&self.dir).is_some() {
            let _ = Command::new("fusermount3")
                .args(["-u", "-z"])
                .arg(&self.dir)
                .status();
        }
    }
}

/// Bug: without root `uvfs mount` was served by fuser's session, which answers
/// `FUSE_INTERRUPT` with `ENOSYS` itself: a request blocked in an inner server held its
/// caller for good, against any signal. Fix: mounted through `fusermount3` by uvfs itself
/// (mount.rs `mount_as_user`, the `_FUSE_COMMFD` exchange of libfuse's
/// `fuse_mount_fusermount`) and served by the same loop as a root mount. Here user 65534
/// mounts (needs `/dev/fuse` usable by others, mode 0666 as the distributions' udev rules
/// make it, and `fusermount3`), its `stat` of a hung name dies of SIGINT at once, the
/// mount shows as `fuse.uvfs` owned by 65534, and SIGTERM unmounts it and exits 0.
#[test]
fn an_unprivileged_mount_answers_interrupts() {
    use std::os::unix::fs::{chown, MetadataExt, PermissionsExt};
    use std::os::unix::process::ExitStatusExt;
    let test = "an_unprivileged_mount_answers_interrupts";
    if !common::uvfs_only(test) {
        return;
    }
    if !rustix::process::geteuid().is_root() {
        common::skip(test, "needs root to become user 65534 (setpriv)");
        return;
    }
    // A system python3 (one under root's home, e.g. pyenv's, is closed to user 65534).
    let py = ["/usr/bin/python3", "/usr/local/bin/python3"]
        .map(PathBuf::from)
        .into_iter()
        .find(|p| p.is_file());
    let (Some(py), Some(setpriv)) = (py, common::find_in_path("setpriv")) else {
        common::skip(test, "no /usr/bin/python3 or setpriv");
        return;
    };
    let dev_mode = std::fs::metadata("/dev/fuse").map_or(0, |m| m.mode());
    if dev_mode & 0o006 != 0o006 {
        common::skip(
            test,
            &format!(
                "/dev/fuse is mode {:o}: other users may not use FUSE",
                dev_mode & 0o777
            ),
        );
        return;
    }
    // Everything user 65534 runs or writes, in a directory it may use: the test binary's
    // directory may be closed to it.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // Canonical: mountinfo shows the real path (a symlinked $TMPDIR would never match).
    let base = tmp.path().canonicalize().unwrap();
    let uvfs = base.join("uvfs");
    std::fs::copy(env!("CARGO_BIN_EXE_uvfs"), &uvfs).unwrap();
    let script = base.join("hang_server.py");
    std::fs::copy(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/hang_server.py"),
        &script,
    )
    .unwrap();
    let home = base.join("home");
    std::fs::create_dir(&home).unwrap();
    chown(&home, Some(65534), Some(65534)).unwrap();
    let dir = home.join("m");
    std::fs::create_dir(&dir).unwrap();
    chown(&dir, Some(65534), Some(65534)).unwrap();
    let log = home.join("inner.log");
    let as_user = |prog: &Path| {
        let mut c = Command::new(&setpriv);
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(prog);
        c
    };
    let spec = format!(
        "/sub={} {} {{}} {}",
        py.display(),
        script.display(),
        log.display()
    );
    let errors = home.join("server.err");
    let spawn = || {
        as_user(&uvfs)
            .arg("mount")
            .arg(&dir)
            .args(["--threads", "2", "--fuse", &spec])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&errors).unwrap())
            .spawn()
    };
    // ETXTBSY: a process another test thread forks meanwhile may briefly hold the copy's
    // write descriptor (a fork before the copy's close), as long as it takes to exec.
    let mut tries = 0;
    let server = loop {
        match spawn() {
            Err(e)
                if e.raw_os_error() == Some(rustix::io::Errno::TXTBSY.raw_os_error())
                    && tries < 100 =>
            {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            r => break r.unwrap(),
        }
    };
    let mut guard = UserMount {
        dir: dir.clone(),
        server: Some(server),
    };
    let start = Instant::now();
    let entry = loop {
        if let Some(e) = common::mount_at(&dir) {
            break e;
        }
        let s = guard.server.as_mut().unwrap();
        let exited = s.try_wait().unwrap();
        if exited.is_some() || start.elapsed() > PROMPT {
            let _ = s.kill();
            let status = s.wait().unwrap();
            panic!(
                "no mount by user 65534 after {:?}: {status:?}: {}",
                start.elapsed(),
                std::fs::read_to_string(&errors).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(entry.fstype, "fuse.uvfs", "{entry:?}");
    assert!(entry.super_options.contains("user_id=65534"), "{entry:?}");

    let child = as_user(Path::new("stat"))
        .arg(dir.join("sub/slow"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_log(&log, "hung", 1);
    kill_process(Pid::from_child(&child), Signal::INT).unwrap();
    let out = wait_prompt(child, "stat killed by SIGINT on a mount made without root");
    assert_eq!(
        out.status.signal(),
        Some(Signal::INT.as_raw()),
        "{:?}",
        out.status
    );
    wait_log(&log, "answered", 1);

    let server = guard.server.take().unwrap();
    kill_process(Pid::from_child(&server), Signal::TERM).unwrap();
    let out = wait_prompt(server, "uvfs mount after SIGTERM");
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        std::fs::read_to_string(&errors).unwrap_or_default()
    );
    assert!(
        common::mount_at(&dir).is_none(),
        "still mounted after SIGTERM"
    );
}
