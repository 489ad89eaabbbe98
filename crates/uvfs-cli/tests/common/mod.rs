//! Harness for the `mount_*` tests: a [`MountGuard`] that serves a fresh, empty
//! directory over FUSE with `uvfs mount` and never leaves the mount behind.
//!
//! # Subjects
//! The tests run against `uvfs mount` by default. Two environment variables point
//! them elsewhere, so that the tests themselves can be checked on a known-good file
//! system:
//! - `UVFS_MOUNT_TEST_SERVER="CMD ARGS..."`: spawn this FUSE server (split on
//!   whitespace, the mount point appended) instead of `uvfs mount`, with `{tmp}`
//!   replaced by a fresh temporary directory per guard; e.g.
//!   `passthrough_ll -f -o source={tmp}` from libfuse's examples. The uvfs
//!   options a test asks for are not passed on.
//! - `UVFS_MOUNT_TEST_DIR=DIR`: spawn nothing; each guard is a fresh
//!   subdirectory of DIR (e.g. a kernel tmpfs). `UVFS_MOUNT_TEST_PID=PID` names
//!   the process serving DIR, for the descriptor and memory checks.
//!
//! `UVFS_MOUNT_TEST_ARGS="--permissions uvfs ..."` appends options to every `uvfs
//! mount` the tests start (e.g. to run them all with uvfs checking permissions). With
//! `--transport uring` among them, every clean stop also checks that the server's rings
//! registered (its `transport uring:` line) and prints how many requests they served.
//!
//! # Skipping
//! A FUSE subject needs root, `/dev/fuse`, `fusermount3` and a `uvfs` with a
//! `mount` subcommand. Without them a test prints `skipped: <why>` and passes,
//! unless `UVFS_REQUIRE_FUSE=1` (CI), where it fails.
//!
//! # Cleanup
//! Drop sends SIGTERM and waits up to [`STOP_TIMEOUT`]; a mount still there is
//! detached with `fusermount3 -u -z` (then `umount -l`), a server still running is
//! killed, and the directory is removed only once nothing is mounted on it. The
//! server also gets SIGTERM if the thread that spawned it dies
//! (`PR_SET_PDEATHSIG`), and CI's `.ci/run` detaches any `fuse.uvfs` mount left at
//! exit.

#![allow(dead_code)]

use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{kill_process, Pid, Signal};

/// How long [`MountGuard::mount`] waits for the mount to appear.
pub const MOUNT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a server gets to unmount and exit after SIGTERM.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// The fstype `uvfs mount` shows in `/proc/self/mountinfo`.
pub const UVFS_FSTYPE: &str = "fuse.uvfs";

/// What the tests run against (see the module doc).
#[derive(Debug, Clone)]
enum Subject {
    Uvfs,
    Server(Vec<String>),
    Dir(PathBuf),
}

impl Subject {
    fn from_env() -> Subject {
        if let Some(dir) = std::env::var_os("UVFS_MOUNT_TEST_DIR") {
            return Subject::Dir(PathBuf::from(dir));
        }
        match std::env::var("UVFS_MOUNT_TEST_SERVER") {
            Ok(cmd) if !cmd.trim().is_empty() => {
                Subject::Server(cmd.split_whitespace().map(String::from).collect())
            }
            _ => Subject::Uvfs,
        }
    }
}

/// True if `UVFS_MOUNT_TEST_ARGS` asks for `--transport uring` (CI's second pass of the
/// mount tests): each clean stop then checks that the rings served the mount.
pub fn uring_requested() -> bool {
    std::env::var("UVFS_MOUNT_TEST_ARGS").is_ok_and(|a| {
        let a: Vec<&str> = a.split_whitespace().collect();
        a.contains(&"--transport=uring") || a.windows(2).any(|w| w == ["--transport", "uring"])
    })
}

/// True if `UVFS_REQUIRE_FUSE=1`: missing prerequisites fail instead of skip.
pub fn fuse_required() -> bool {
    std::env::var("UVFS_REQUIRE_FUSE").is_ok_and(|v| v == "1")
}

/// Reports a missing prerequisite: panics under `UVFS_REQUIRE_FUSE=1`, else prints
/// `skipped: <test>: <why>` (shown with `--nocapture`; the test passes).
pub fn skip(test: &str, why: &str) {
    assert!(!fuse_required(), "{test}: UVFS_REQUIRE_FUSE=1 but {why}");
    println!("skipped: {test}: {why}");
}

/// Why a FUSE server cannot be run here, if it cannot.
fn fuse_missing() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("not root".into());
    }
    if let Err(e) = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        return Some(format!("cannot open /dev/fuse: {e}"));
    }
    if find_in_path("fusermount3").is_none() {
        return Some("fusermount3 not in PATH (apt-get install fuse3)".into());
    }
    None
}

/// True if the environment names a stand-in subject (then tests of `uvfs
/// mount`'s own behaviour do not apply).
pub fn stand_in() -> bool {
    !matches!(Subject::from_env(), Subject::Uvfs)
}

/// Why `uvfs mount` cannot be run here, if it cannot: FUSE is missing (see
/// [`MountGuard::mount`]) or `uvfs` has no `mount` subcommand yet.
pub fn uvfs_missing() -> Option<String> {
    fuse_missing().or_else(uvfs_mount_missing)
}

/// Why `uvfs mount` cannot be run, if it cannot: no `mount` subcommand yet.
fn uvfs_mount_missing() -> Option<String> {
    match Command::new(env!("CARGO_BIN_EXE_uvfs"))
        .args(["mount", "--help"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => None,
        Ok(s) => Some(format!(
            "`uvfs mount --help` failed ({s}): no mount subcommand"
        )),
        Err(e) => Some(format!("cannot run uvfs: {e}")),
    }
}

/// The first `name` in `$PATH`.
pub fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// One `/proc/self/mountinfo` entry, the fields the harness reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// Mount point, unescaped.
    pub mount_point: PathBuf,
    /// Mount options (per mount: `rw,nosuid,...`).
    pub options: String,
    /// File system type, e.g. `fuse.uvfs`.
    pub fstype: String,
    /// Mount source, e.g. `uvfs`.
    pub source: String,
    /// Per-superblock options (`rw,user_id=0,...`).
    pub super_options: String,
}

/// Undoes mountinfo's octal escapes (`\040` for a space, ...).
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            out.push(u8::from_str_radix(&field[i + 1..i + 4], 8).unwrap_or(b'?'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every entry of `/proc/self/mountinfo`, in mount order.
pub fn mounts() -> Vec<MountEntry> {
    let text = fs::read_to_string("/proc/self/mountinfo").expect("read /proc/self/mountinfo");
    text.lines()
        .filter_map(|line| {
            let (pre, post) = line.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let post: Vec<&str> = post.split(' ').collect();
            Some(MountEntry {
                mount_point: PathBuf::from(unescape(pre.get(4)?)),
                options: (*pre.get(5)?).to_owned(),
                fstype: unescape(post.first()?),
                source: unescape(post.get(1)?),
                super_options: post.get(2).copied().unwrap_or("").to_owned(),
            })
        })
        .collect()
}

/// The topmost mount on `path`, if any.
pub fn mount_at(path: &Path) -> Option<MountEntry> {
    mounts().into_iter().rev().find(|m| m.mount_point == path)
}

/// A fresh directory served by the subject for the life of the guard (see the
/// module doc for cleanup).
#[derive(Debug)]
pub struct MountGuard {
    /// The mount point (or, for a directory subject, the test's subdirectory).
    path: PathBuf,
    /// Owns `path`; taken (and the directory removed) once nothing is mounted there.
    dir: Option<tempfile::TempDir>,
    /// The server, until it has been reaped.
    child: Option<Child>,
    /// The server's exit status, once reaped.
    status: Option<ExitStatus>,
    /// The server's stdout and stderr.
    log: Option<tempfile::NamedTempFile>,
    /// A stand-in server's `{tmp}` (removed after the mount is gone).
    source_dir: Option<tempfile::TempDir>,
    /// The process that serves `path`, for the resource checks.
    server_pid: Option<u32>,
    /// Whether a FUSE server is expected to be mounted at `path`.
    fuse: bool,
    /// Whether that server is `uvfs mount` (not a stand-in).
    uvfs: bool,
    /// Whether `stop_with` has signalled the server and waited.
    stopping: bool,
}

impl MountGuard {
    /// Mounts a fresh directory with `uvfs mount DIR ARGS` (or the subject the
    /// environment names) and waits until the mount is in `/proc/self/mountinfo`.
    ///
    /// Returns `None` (after [`skip`]) if a prerequisite is missing. Panics, with
    /// the server's output, if it exits or does not mount within [`MOUNT_TIMEOUT`].
    pub fn mount(test: &str, args: &[&str]) -> Option<MountGuard> {
        let subject = Subject::from_env();
        if let Subject::Dir(base) = &subject {
            let dir = tempfile::Builder::new()
                .prefix(&format!("{test}-"))
                .tempdir_in(base)
                .unwrap_or_else(|e| panic!("temporary directory in {}: {e}", base.display()));
            let server_pid = std::env::var("UVFS_MOUNT_TEST_PID")
                .ok()
                .map(|p| p.parse().expect("UVFS_MOUNT_TEST_PID: a pid"));
            return Some(MountGuard {
                path: dir.path().to_owned(),
                dir: Some(dir),
                child: None,
                status: None,
                log: None,
                source_dir: None,
                server_pid,
                fuse: false,
                uvfs: false,
                stopping: false,
            });
        }
        if let Some(why) = fuse_missing() {
            skip(test, &why);
            return None;
        }
        let mut source_dir = None;
        let mut cmd = match &subject {
            Subject::Uvfs => {
                if let Some(why) = uvfs_mount_missing() {
                    skip(test, &why);
                    return None;
                }
                Command::new(env!("CARGO_BIN_EXE_uvfs"))
            }
            Subject::Server(argv) => {
                let fresh = tempfile::tempdir().expect("temporary directory");
                let fresh_path = fresh.path().to_str().expect("UTF-8 temporary path");
                let argv: Vec<String> = argv
                    .iter()
                    .map(|a| a.replace("{tmp}", fresh_path))
                    .collect();
                source_dir = Some(fresh);
                let mut cmd = Command::new(&argv[0]);
                cmd.args(&argv[1..]);
                cmd
            }
            Subject::Dir(_) => unreachable!(),
        };
        let dir = tempfile::Builder::new()
            .prefix(&format!("uvfs-{test}-"))
            .tempdir()
            .expect("temporary mount point");
        let path = dir.path().canonicalize().expect("canonical mount point");
        let log = tempfile::NamedTempFile::new().expect("server log file");
        if let Subject::Uvfs = subject {
            cmd.arg("mount").arg(&path).args(args);
            if let Ok(extra) = std::env::var("UVFS_MOUNT_TEST_ARGS") {
                cmd.args(extra.split_whitespace());
            }
        } else {
            cmd.arg(&path);
        }
        cmd.stdin(Stdio::null())
            .stdout(log.reopen().expect("log"))
            .stderr(log.reopen().expect("log"));
        // SAFETY: the closure only makes the prctl(2) system call, which is
        // async-signal-safe, between fork and exec; it touches no memory of the
        // parent's.
        unsafe {
            cmd.pre_exec(|| {
                // The server unmounts and exits if this thread dies without
                // dropping the guard (e.g. the test process is killed).
                rustix::process::set_parent_process_death_signal(Some(Signal::TERM))?;
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
        let mut guard = MountGuard {
            path,
            dir: Some(dir),
            server_pid: Some(child.id()),
            child: Some(child),
            status: None,
            log: Some(log),
            source_dir,
            fuse: true,
            uvfs: matches!(subject, Subject::Uvfs),
            stopping: false,
        };
        guard.wait_mounted(&format!("{cmd:?}"));
        Some(guard)
    }

    /// Polls mountinfo until `path` is a FUSE mount; panics (the guard then
    /// cleans up) if the server exits first or [`MOUNT_TIMEOUT`] passes.
    fn wait_mounted(&mut self, what: &str) {
        let start = Instant::now();
        loop {
            if let Some(m) = mount_at(&self.path) {
                if m.fstype.starts_with("fuse") {
                    return;
                }
            }
            if let Some(status) = self.try_reap() {
                panic!(
                    "{what} exited with {status} before mounting {}; its output:\n{}",
                    self.path.display(),
                    self.server_log()
                );
            }
            if start.elapsed() > MOUNT_TIMEOUT {
                panic!(
                    "{what}: no mount on {} after {MOUNT_TIMEOUT:?}; its output:\n{}",
                    self.path.display(),
                    self.server_log()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The mounted directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The process serving the mount, if known.
    pub fn server_pid(&self) -> Option<u32> {
        self.server_pid
    }

    /// True if the subject is a FUSE server this guard spawned.
    pub fn is_fuse(&self) -> bool {
        self.fuse
    }

    /// True if the subject is `uvfs mount` itself (not a stand-in).
    pub fn is_uvfs(&self) -> bool {
        self.uvfs
    }

    /// The mountinfo entry of the mount (None for a directory subject).
    pub fn mount_entry(&self) -> Option<MountEntry> {
        self.fuse.then(|| mount_at(&self.path)).flatten()
    }

    /// Everything the server printed so far.
    pub fn server_log(&self) -> String {
        let Some(log) = &self.log else {
            return String::new();
        };
        let mut text = String::new();
        let mut f = log.reopen().expect("reopen server log");
        f.seek(SeekFrom::Start(0)).ok();
        f.read_to_string(&mut text).ok();
        text
    }

    /// Reaps the server if it has exited; its status.
    fn try_reap(&mut self) -> Option<ExitStatus> {
        if let Some(child) = &mut self.child {
            if let Ok(Some(status)) = child.try_wait() {
                self.status = Some(status);
                self.child = None;
            }
        }
        self.status
    }

    /// Waits up to `timeout` for the server to exit; its status, if it has.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        while self.child.is_some() && start.elapsed() < timeout {
            if self.try_reap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.status
    }

    /// Sends `signal` to the server if it still runs.
    pub fn signal(&self, signal: Signal) {
        if let Some(child) = &self.child {
            let pid = Pid::from_child(child);
            let _ = kill_process(pid, signal);
        }
    }

    /// Stops the server cleanly and checks that it did: after SIGTERM it must
    /// unmount and exit within [`STOP_TIMEOUT`], with status 0 if it is `uvfs
    /// mount` (a stand-in's status is its own business: libfuse's examples exit
    /// 1). The guard's cleanup runs either way; panics (after it) if the server
    /// misbehaved.
    pub fn unmount(self) {
        self.stop_with(Signal::TERM);
    }

    /// As [`MountGuard::unmount`], with `signal` instead of SIGTERM.
    pub fn stop_with(mut self, signal: Signal) {
        let signal_name = match signal {
            Signal::TERM => "SIGTERM",
            Signal::INT => "SIGINT",
            _ => "the signal",
        };
        if !self.fuse {
            return;
        }
        self.signal(signal);
        self.stopping = true;
        let status = self.wait_exit(STOP_TIMEOUT);
        let left = mount_at(&self.path);
        let log = self.server_log();
        let path = self.path.clone();
        let self_uvfs = self.uvfs;
        self.cleanup();
        match status {
            Some(s) if s.success() || !self_uvfs => {}
            Some(s) => {
                panic!("server exited with {s} after {signal_name}, want 0; its output:\n{log}")
            }
            None => panic!(
                "server still running {STOP_TIMEOUT:?} after {signal_name}; its output:\n{log}"
            ),
        }
        assert!(
            left.is_none(),
            "server exited but left {} mounted: {left:?}",
            path.display()
        );
        if self_uvfs && uring_requested() {
            // The rings really served: the startup line says they registered, the last
            // line how many requests went through them (shown with --nocapture).
            assert!(
                log.contains("uvfs: transport uring: "),
                "--transport uring but no rings; the server's output:\n{log}"
            );
            if let Some(l) = log
                .lines()
                .find(|l| l.contains("requests through io_uring"))
            {
                eprintln!("{}: {l}", path.display());
            }
        }
    }

    /// Stops the server and removes the directory, whatever state they are in.
    /// Idempotent; never panics.
    fn cleanup(&mut self) {
        if self.fuse {
            // (Not again if `stop_with` already waited for the server.)
            if self.child.is_some() && self.try_reap().is_none() && !self.stopping {
                self.signal(Signal::TERM);
                self.wait_exit(STOP_TIMEOUT);
            }
            if mount_at(&self.path).is_some_and(|m| m.fstype.starts_with("fuse")) {
                let _ = Command::new("fusermount3")
                    .arg("-u")
                    .arg("-z")
                    .arg(&self.path)
                    .stderr(Stdio::null())
                    .status();
                if mount_at(&self.path).is_some_and(|m| m.fstype.starts_with("fuse")) {
                    let _ = Command::new("umount")
                        .arg("-l")
                        .arg(&self.path)
                        .stderr(Stdio::null())
                        .status();
                }
            }
            if self.child.is_some() && self.wait_exit(STOP_TIMEOUT).is_none() {
                self.signal(Signal::KILL);
                if let Some(mut child) = self.child.take() {
                    self.status = child.wait().ok();
                }
            }
        }
        let still = self.fuse && mount_at(&self.path).is_some();
        if let Some(dir) = self.dir.take() {
            if still {
                // Removing would walk into whatever is still mounted there.
                eprintln!(
                    "warning: {} is still mounted; leaving the directory",
                    self.path.display()
                );
                let _ = dir.keep();
            } else if self.fuse {
                // An empty mount point: never recurse, in case a mount raced us.
                let _ = fs::remove_dir(dir.keep());
            }
            // A directory subject's tempdir removes its contents on drop.
        }
        if still {
            if let Some(src) = self.source_dir.take() {
                let _ = src.keep();
            }
        }
    }
}

impl Drop for MountGuard {
    fn drop(&mut self) {
        self.cleanup();
    }
}

/// True if a test of `uvfs mount` itself applies: the subject is `uvfs mount` (not a
/// stand-in) and it can run (else the test is skipped, see [`skip`]).
pub fn uvfs_only(test: &str) -> bool {
    if stand_in() {
        println!("skipped: {test}: checks uvfs mount itself, the subject is a stand-in");
        return false;
    }
    if let Some(why) = uvfs_missing() {
        skip(test, &why);
        return false;
    }
    true
}

/// `f(dir)` with a fresh kernel tmpfs mounted on `dir` (detached afterwards): what uvfs
/// is compared with (needs root, as the FUSE tests do).
pub fn on_host_tmpfs<T>(f: impl FnOnce(&Path) -> T) -> T {
    let host = tempfile::tempdir().unwrap();
    rustix::mount::mount(
        "tmpfs",
        host.path(),
        "tmpfs",
        rustix::mount::MountFlags::empty(),
        None::<&std::ffi::CStr>,
    )
    .expect("mount a tmpfs to compare with");
    let r = f(host.path());
    let _ = rustix::mount::unmount(host.path(), rustix::mount::UnmountFlags::DETACH);
    r
}

/// Runs `script` on a kernel tmpfs and on a fresh `uvfs mount` with `args`, and asserts
/// that both give the same; skipped (see [`uvfs_only`]) where the mount cannot be made.
pub fn same_as_host_tmpfs<T: PartialEq + std::fmt::Debug>(
    test: &str,
    args: &[&str],
    script: impl Fn(&Path) -> T,
) {
    if !uvfs_only(test) {
        return;
    }
    let want = on_host_tmpfs(&script);
    let Some(mnt) = MountGuard::mount(test, args) else {
        return;
    };
    let got = script(mnt.path());
    mnt.unmount();
    assert_eq!(got, want, "uvfs mount vs a kernel tmpfs");
}

/// Number of open descriptors of process `pid` (entries of `/proc/PID/fd`).
pub fn fd_count(pid: u32) -> usize {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/fd: {e}"))
        .count()
}

/// Resident set size of process `pid` in bytes (`VmRSS` of `/proc/PID/status`).
pub fn rss_bytes(pid: u32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in /proc/{pid}/status"));
    kb * 1024
}

/// SplitMix64: a small deterministic generator (no dependency), good enough to
/// pick operations; the same seed gives the same sequence everywhere.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let r = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
    }
}

/// Reads `path` whole (a helper with the path in the panic message).
pub fn read_all(path: &Path) -> Vec<u8> {
    let mut v = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut v))
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    v
}
