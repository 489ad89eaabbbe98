//! A FUSE server run by the benchmark as a child process: started on a fresh
//! mount point, waited for until its mount shows in mountinfo, and stopped
//! when closed or dropped (SIGTERM, then `fusermount3 -u -z`, then SIGKILL),
//! its mount point removed, on every exit path: the end of the benchmark, an
//! error, Ctrl-C.
//!
//! The kernel side of such a mount is Linux's fs/fuse (`fuse_fill_super`,
//! `fuse_dev_do_read`); this module is what `mount(8)` and a FUSE daemon's
//! supervisor do for it.
//!
//! Invariants:
//!
//! - The server starts from the thread that runs the benchmark, after that
//!   thread entered its private mount namespace (see
//!   `kernel::private_mount_namespace`; not root: the host's namespace): the
//!   mount is seen by that thread, the workers it spawns and the server, and
//!   nowhere else; it is found in `/proc/thread-self/mountinfo`.
//! - The server runs in its own process group, so a Ctrl-C at the terminal
//!   (sent to the foreground process group) reaches only the benchmark, which
//!   stops its workers, removes its run directories and only then stops the
//!   server; and with `PR_SET_PDEATHSIG` = SIGTERM, so it unmounts and exits
//!   when the benchmark is killed outright.
//! - Its stderr goes to a temporary file, quoted in errors.

use std::io::{Read as _, Seek as _, SeekFrom};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{kill_process, Pid, Signal};

use crate::error::{Context as _, Error, Result};
use crate::interrupt;

/// How long a server may take to mount before the benchmark gives up.
const MOUNT_TIMEOUT: Duration = Duration::from_secs(20);

/// How long a server may take to unmount and exit after SIGTERM, and again
/// after `fusermount3 -u -z`, before the next, harder step.
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);

/// A running FUSE server and its mount point.
///
/// # Invariants
///
/// While `child` is `Some`, the server was started and not yet reaped; the
/// mount point exists until [`FuseMount::close`] or drop removes it, after
/// the server is gone and nothing is mounted on it.
#[derive(Debug)]
pub struct FuseMount {
    /// Who the server is, for messages, e.g. `uvfs mount`.
    what: String,
    /// The server process; `None` once reaped.
    child: Option<Child>,
    /// The exit codes that count as a clean stop after SIGTERM.
    clean_exits: &'static [i32],
    /// The mount point (an empty temporary directory); `None` once removed.
    mountpoint: Option<tempfile::TempDir>,
    /// Its canonical path, as mountinfo shows it.
    path: PathBuf,
    /// The server's stderr.
    log: tempfile::NamedTempFile,
    /// Whether the mount is in a private mount namespace (for the output).
    private: bool,
}

impl FuseMount {
    /// Makes a fresh mount point, starts the server `command(mountpoint)`
    /// and waits (up to 20 s) until a FUSE mount of `subtype` (e.g. `uvfs`,
    /// see [`MountEntry::is_fuse`]) is on the mount point. `what` names the
    /// server in messages; `clean_exits` are the exit codes that mean it
    /// stopped cleanly after SIGTERM.
    ///
    /// # Errors
    ///
    /// The mount point or log file cannot be made, the server cannot be
    /// started, exits before mounting, does not mount in time, or a signal
    /// arrived while waiting (the server is then stopped and the mount point
    /// removed).
    pub fn start(
        what: &str,
        subtype: &str,
        clean_exits: &'static [i32],
        command: impl FnOnce(&Path) -> Command,
    ) -> Result<FuseMount> {
        // Before anything is mounted: see the module doc.
        let private = crate::kernel::private_mount_namespace().is_ok();
        let mountpoint = tempfile::Builder::new()
            .prefix("uvfs-bench-mnt-")
            .tempdir()
            .with_context(|| format!("{what}: creating a mount point"))?;
        let path = mountpoint
            .path()
            .canonicalize()
            .with_context(|| format!("{what}: resolving {}", mountpoint.path().display()))?;
        let log = tempfile::Builder::new()
            .prefix("uvfs-bench-server-")
            .suffix(".log")
            .tempfile()
            .with_context(|| format!("{what}: creating the server's log file"))?;
        let stderr = log
            .as_file()
            .try_clone()
            .with_context(|| format!("{what}: opening the server's log file"))?;
        let mut command = command(&path);
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .process_group(0);
        // SAFETY: the closure runs in the child between fork and exec, where
        // only async-signal-safe calls are allowed: it makes one `prctl`
        // system call, without allocating or taking a lock.
        unsafe {
            command.pre_exec(|| {
                rustix::process::set_parent_process_death_signal(Some(Signal::TERM))
                    .map_err(std::io::Error::from)
            });
        }
        let child = command
            .spawn()
            .with_context(|| format!("{what}: starting {:?}", command.get_program()))?;
        let mut mount = FuseMount {
            what: what.to_owned(),
            child: Some(child),
            clean_exits,
            mountpoint: Some(mountpoint),
            path,
            log,
            private,
        };
        // On error, `mount` drops: the server is stopped, the point removed.
        mount.wait_mounted(subtype)?;
        Ok(mount)
    }

    /// Waits until a FUSE mount of `subtype` is on the mount point.
    fn wait_mounted(&mut self, subtype: &str) -> Result<()> {
        let deadline = Instant::now() + MOUNT_TIMEOUT;
        loop {
            let found = mounted(&self.path)?;
            if found.as_ref().is_some_and(|m| m.is_fuse(subtype)) {
                return Ok(());
            }
            interrupt::check()?;
            let child = self.child.as_mut().ok_or_else(|| Error::msg("no server"))?;
            if let Some(status) = child
                .try_wait()
                .with_context(|| format!("{}: waiting for the server", self.what))?
            {
                self.child = None;
                return Err(Error::msg(format!(
                    "{} exited ({status}) before mounting {}{}",
                    self.what,
                    self.path.display(),
                    self.stderr_tail()
                )));
            }
            if Instant::now() >= deadline {
                return Err(Error::msg(format!(
                    "{}: no fuse.{subtype} mount on {} after {} s (found: {}){}",
                    self.what,
                    self.path.display(),
                    MOUNT_TIMEOUT.as_secs(),
                    found.map_or("none".to_owned(), |m| format!("{} {}", m.fstype, m.source)),
                    self.stderr_tail()
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The server's process id, 0 once it is gone.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Where the mount is, for the output: "at PATH (in a private mount
    /// namespace)".
    pub fn location(&self) -> String {
        format!(
            "at {}{}",
            self.path.display(),
            if self.private {
                " (in a private mount namespace)"
            } else {
                ""
            }
        )
    }

    /// Stops the server (SIGTERM; after 10 s `fusermount3 -u -z`; after 10
    /// s more SIGKILL), detaches the mount if it is still there, and removes
    /// the mount point. Every fd into the mount should be closed first.
    ///
    /// # Errors
    ///
    /// The server had exited before it was asked to, did not stop cleanly
    /// (exit code not in `clean_exits`, or it needed the harder steps), the
    /// mount could not be detached, or the mount point could not be removed;
    /// the server's stderr is quoted.
    pub fn close(mut self) -> Result<()> {
        self.release()
    }

    /// Stops, detaches and removes; idempotent (the second call does
    /// nothing).
    fn release(&mut self) -> Result<()> {
        let mut problems = Vec::new();
        if let Some(mut child) = self.child.take() {
            match child.try_wait() {
                Ok(Some(status)) => problems.push(format!("exited during the run ({status})")),
                _ => {
                    if let Err(p) = self.stop(&mut child) {
                        problems.push(p);
                    }
                }
            }
        }
        if self.mountpoint.is_none() {
            return Ok(());
        }
        if let Ok(Some(_)) = mounted(&self.path) {
            // A server that crashed or was killed leaves its mount behind
            // (reads fail with ENOTCONN); only a detach frees the mount point.
            if let Err(e) = detach(&self.path) {
                problems.push(e);
            }
        }
        if let Some(dir) = self.mountpoint.take() {
            if let Err(e) = dir.close() {
                problems.push(format!("removing {}: {e}", self.path.display()));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::msg(format!(
                "{}: {}{}",
                self.what,
                problems.join("; "),
                self.stderr_tail()
            )))
        }
    }

    /// SIGTERM, wait; `fusermount3 -u -z`, wait; SIGKILL, wait. Reaps the
    /// child in every case.
    ///
    /// # Errors
    ///
    /// What went wrong, as a phrase for [`FuseMount::release`]'s error.
    fn stop(&self, child: &mut Child) -> std::result::Result<(), String> {
        let pid = Pid::from_child(child);
        if let Err(e) = kill_process(pid, Signal::TERM) {
            // It exited (and is a zombie) between try_wait and now: reaped below.
            if e != rustix::io::Errno::SRCH {
                return Err(format!("SIGTERM: {e}"));
            }
        }
        if let Some(status) = wait_timeout(child, EXIT_TIMEOUT) {
            return match status.code() {
                Some(code) if self.clean_exits.contains(&code) => Ok(()),
                _ => Err(format!("stopped with {status} after SIGTERM")),
            };
        }
        let mut problem = format!("still running {} s after SIGTERM", EXIT_TIMEOUT.as_secs());
        // Unmounted, the server's next read of /dev/fuse fails (ENODEV) and
        // it exits.
        if let Err(e) = detach(&self.path) {
            problem.push_str(&format!("; {e}"));
        }
        if wait_timeout(child, EXIT_TIMEOUT).is_none() {
            problem.push_str("; killed");
            let _ = child.kill();
            let _ = child.wait();
        }
        Err(problem)
    }

    /// The last lines of the server's stderr, as `": stderr: ..."`, or
    /// nothing if it wrote nothing.
    fn stderr_tail(&self) -> String {
        let mut f = self.log.as_file();
        let len = f.metadata().map_or(0, |m| m.len());
        let mut buf = Vec::new();
        if f.seek(SeekFrom::Start(len.saturating_sub(2048))).is_err()
            || f.read_to_end(&mut buf).is_err()
        {
            return String::new();
        }
        let text = String::from_utf8_lossy(&buf);
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        if lines.is_empty() {
            return String::new();
        }
        let tail = &lines[lines.len().saturating_sub(5)..];
        format!(": server stderr: {}", tail.join(" | "))
    }
}

impl Drop for FuseMount {
    fn drop(&mut self) {
        // Best effort on the error path; `close` reports failures.
        let _ = self.release();
    }
}

/// Waits up to `timeout` for `child` to exit; its status, or `None` if it
/// still runs.
fn wait_timeout(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => return None,
            // ECHILD: already reaped; nothing to wait for.
            Err(_) => return child.wait().ok(),
        }
    }
}

/// Detaches the mount on `path`: `fusermount3 -u -z` (works for the
/// mount's owner, root or not), else `umount2(MNT_DETACH)`.
///
/// # Errors
///
/// Both failed, as a phrase.
fn detach(path: &Path) -> std::result::Result<(), String> {
    let fusermount = Command::new("fusermount3")
        .args(["-u", "-z", "-q", "--"])
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if matches!(fusermount, Ok(s) if s.success()) {
        return Ok(());
    }
    rustix::mount::unmount(path, rustix::mount::UnmountFlags::DETACH).map_err(|e| {
        let fm = match fusermount {
            Ok(s) => s.to_string(),
            Err(e) => e.to_string(),
        };
        format!(
            "detaching {}: fusermount3 -u -z: {fm}; umount2(MNT_DETACH): {e}",
            path.display()
        )
    })
}

/// One mount, as `/proc/*/mountinfo` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// The file system type, e.g. `tmpfs`, `fuse`, `fuse.passthrough_ll`.
    pub fstype: String,
    /// The mount source, e.g. `uvfs`, `passthrough_ll`.
    pub source: String,
}

impl MountEntry {
    /// Whether this is a FUSE mount of `subtype`: type `fuse.SUBTYPE` (libfuse
    /// and `fusermount3` mount so), or type `fuse` with source `SUBTYPE`
    /// (fuser's direct `mount(2)` as root passes no subtype; `uvfs mount`
    /// names its source `uvfs`).
    pub fn is_fuse(&self, subtype: &str) -> bool {
        self.fstype.strip_prefix("fuse.") == Some(subtype)
            || (self.fstype == "fuse" && self.source == subtype)
    }
}

/// The topmost mount on `path` in the calling thread's mount namespace,
/// from `/proc/thread-self/mountinfo`; `None` if nothing is mounted there.
///
/// # Errors
///
/// mountinfo cannot be read.
pub fn mounted(path: &Path) -> Result<Option<MountEntry>> {
    let info = std::fs::read("/proc/thread-self/mountinfo")
        .with_context(|| "reading /proc/thread-self/mountinfo")?;
    Ok(mount_in(&info, path))
}

/// [`mounted`] on mountinfo's text: the last line (mounts are listed in
/// mount order) whose mount point is `path`.
fn mount_in(info: &[u8], path: &Path) -> Option<MountEntry> {
    use std::os::unix::ffi::OsStrExt as _;
    let want = path.as_os_str().as_bytes();
    let mut found = None;
    for line in info.split(|&b| b == b'\n') {
        // id parent major:minor root MOUNT-POINT options [optional...] - FSTYPE SOURCE super
        let fields: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == b"-") else {
            continue;
        };
        if fields.len() > 4 && dash + 2 < fields.len() && unescape(fields[4]) == want {
            found = Some(MountEntry {
                fstype: String::from_utf8_lossy(fields[dash + 1]).into_owned(),
                source: String::from_utf8_lossy(&unescape(fields[dash + 2])).into_owned(),
            });
        }
    }
    found
}

/// A mountinfo field with its octal escapes (`\040` for a space, `\011`,
/// `\012`, `\134`) decoded.
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let oct = field.get(i + 1..i + 4);
        match oct {
            Some(d) if field[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)) => {
                out.push(d.iter().fold(0u8, |n, c| n.wrapping_mul(8) + (c - b'0')));
                i += 4;
            }
            _ => {
                out.push(field[i]);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mount points with escapes; the topmost mount wins; both ways a FUSE
    /// subtype shows.
    #[test]
    fn parses_mountinfo() {
        let info = b"22 1 0:21 / /proc rw,nosuid shared:12 - proc proc rw\n\
            44 27 0:40 / /tmp/a\\040b rw,nosuid,nodev,relatime - fuse.passthrough_ll passthrough_ll rw,user_id=0\n\
            45 44 0:41 / /tmp/a\\040b rw,relatime - fuse uvfs rw,user_id=0,default_permissions\n";
        let top = mount_in(info, Path::new("/tmp/a b")).unwrap();
        assert_eq!((top.fstype.as_str(), top.source.as_str()), ("fuse", "uvfs"));
        assert!(top.is_fuse("uvfs") && !top.is_fuse("passthrough_ll"));
        let proc = mount_in(info, Path::new("/proc")).unwrap();
        assert_eq!(proc.fstype, "proc");
        assert!(!proc.is_fuse("proc"));
        let ll = MountEntry {
            fstype: "fuse.passthrough_ll".into(),
            source: "x".into(),
        };
        assert!(ll.is_fuse("passthrough_ll") && !ll.is_fuse("uvfs"));
        assert_eq!(mount_in(info, Path::new("/tmp")), None);
        assert_eq!(unescape(b"x\\134y\\01"), b"x\\y\\01");
    }

    /// A server that exits before mounting: the error quotes its stderr and
    /// the mount point is gone.
    #[test]
    fn server_exiting_early_is_an_error_with_its_stderr() {
        let mut made = PathBuf::new();
        let e = FuseMount::start("fake server", "fake", &[0], |p| {
            made = p.to_path_buf();
            let mut c = Command::new("sh");
            c.args(["-c", "echo no fuse here >&2; exit 3"]);
            c
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("fake server exited"), "{e}");
        assert!(e.contains("no fuse here"), "{e}");
        assert!(!made.as_os_str().is_empty() && !made.exists(), "{made:?}");
    }
}
