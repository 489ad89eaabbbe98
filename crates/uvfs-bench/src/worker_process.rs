//! The `run` and `proot` targets: the kernel target's own syscall loops ([`crate::kernel`])
//! in a separate program, `uvfs bench-worker`, started under `uvfs run` (seccomp user
//! notification onto uvfs) or under `proot` (ptrace path translation), so the workloads
//! are written once and only what stands between the program and its files differs.
//!
//! Linux analogue: none; this is the benchmark's own process plumbing (what a supervisor's
//! test driver does).
//!
//! The worker process lives as long as its target: it reads one request per line on stdin
//! (`{"workload":"creat-clo","threads":2,"duration_s":1.0}`), runs it with
//! [`harness::run_one`] on a [`KernelTarget`] in its `--dir` (setup, the workers pinned
//! as here, teardown) and answers one line on stdout (`{"rate":123.4}` or
//! `{"error":"..."}`). The harness's warm-up and interleaving work as for an in-process
//! target ([`Target::measure_elsewhere`]): the tree is imported once per worker process,
//! and the repetitions of every target alternate in one run.
//!
//! Where the worker works:
//!
//! - `run`: `uvfs run --bind EXE_DIR:/uvfs-bench/bin:ro [--bind TREE:/uvfs-bench/tree:ro]
//!   -- /uvfs-bench/bin/uvfs bench-worker --dir /tmp [--tree /uvfs-bench/tree]`: the run
//!   directory is on `uvfs run`'s root tmpfs (uvfs memory), which is what is measured.
//!   The `tree` workload's tree is bound read-only and imported by the worker into that
//!   tmpfs, as the kernel target imports it into its tmpfs: both sides then read files
//!   from memory, through their own file systems; reading through the bind would measure
//!   hostfs and the host's file system instead.
//! - `proot`: `proot uvfs bench-worker --dir HOST_TMPFS [--tree TREE]`, `HOST_TMPFS` a
//!   private tmpfs like the kernel target's ([`HostDir`]), kept by this process.
//!
//! Invariants: the worker process runs in its own process group (a Ctrl-C at the terminal
//! reaches only the benchmark, which then stops it) with `PR_SET_PDEATHSIG` = SIGKILL
//! (`uvfs run` forwards nothing then; its program gets SIGKILL by its own parent-death
//! signal); its stderr goes to a temporary file, quoted in errors.

use std::io::{BufRead as _, Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{Context as _, Error, Result};
use crate::harness;
use crate::interrupt;
use crate::kernel::{HostDir, KernelTarget};
use crate::report::Report;
use crate::target::{Target, Worker};
use crate::workloads::{HostTree, Workload, WorkloadKind};

/// Where the `run` target binds the directory of the `uvfs` binary in the view.
const VIEW_BIN: &str = "/uvfs-bench/bin";

/// Where the `run` target binds the `tree` workload's host tree in the view.
const VIEW_TREE: &str = "/uvfs-bench/tree";

/// The `run` target's run directory in the view: on `uvfs run`'s root tmpfs.
const VIEW_DIR: &str = "/tmp";

/// How long a worker process may take after its stdin closes before it is killed.
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);

/// How much longer than the run's duration a worker process may take to answer (setup,
/// the first `tree` run's import, teardown) before it counts as hung.
const ANSWER_SLACK: Duration = Duration::from_secs(300);

/// `run`'s goal: at most this many microseconds per notified call (one thread, pinned).
pub const GOAL_US_PER_CALL: f64 = 5.0;

/// `run`'s goal: at least this many times `mount` on [`GOAL_MOUNT_WORKLOADS`].
pub const GOAL_OVER_MOUNT: f64 = 3.0;

/// The workloads the [`GOAL_OVER_MOUNT`] goal is stated for.
pub const GOAL_MOUNT_WORKLOADS: [WorkloadKind; 2] = [WorkloadKind::CreatClo, WorkloadKind::Futimes];

/// `run`'s goal: at least this many times `proot` on every workload.
pub const GOAL_OVER_PROOT: f64 = 5.0;

/// One request to a worker process.
#[derive(Debug, Serialize, Deserialize)]
struct Request {
    /// The workload's name ([`WorkloadKind::name`]).
    workload: String,
    /// Worker threads.
    threads: usize,
    /// The measured run's length.
    duration_s: f64,
}

/// A worker process's answer: the rate, or why there is none.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Answer {
    /// Operations per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    rate: Option<f64>,
    /// The run's error, as text.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// `uvfs bench-worker`: serves requests from stdin on a [`KernelTarget`] in a fresh
/// directory under `dir`, reading `tree` for the `tree` workload (once, at its first
/// request), until stdin ends; then closes the target.
///
/// # Errors
///
/// The directory cannot be made, stdin or stdout fail, or closing the target fails. A
/// run's own failure is answered, not returned.
pub fn serve(dir: &Path, tree: Option<&Path>) -> Result<()> {
    let host = HostDir::create(Some(dir))?;
    let mut target = KernelTarget::new(host)?;
    let mut host_tree: Option<Arc<HostTree>> = None;
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    for line in stdin.lock().lines() {
        let line = line.with_context(|| "bench-worker: reading stdin")?;
        let answer = match serve_one(&mut target, &mut host_tree, tree, &line) {
            Ok(rate) => Answer {
                rate: Some(rate),
                error: None,
            },
            Err(e) => Answer {
                rate: None,
                error: Some(e.to_string()),
            },
        };
        let mut out = serde_json::to_string(&answer)
            .map_err(|e| Error::new("bench-worker: encoding the answer", e))?;
        out.push('\n');
        stdout
            .write_all(out.as_bytes())
            .and_then(|()| stdout.flush())
            .with_context(|| "bench-worker: writing stdout")?;
    }
    Box::new(target).close()
}

/// One request: parses it and runs it.
fn serve_one(
    target: &mut KernelTarget,
    host_tree: &mut Option<Arc<HostTree>>,
    tree: Option<&Path>,
    line: &str,
) -> Result<f64> {
    let req: Request = serde_json::from_str(line)
        .map_err(|e| Error::new(format!("bench-worker: request {line:?}"), e))?;
    let kind = WorkloadKind::EVERY
        .into_iter()
        .find(|k| k.name() == req.workload)
        .ok_or_else(|| Error::msg(format!("bench-worker: no workload {:?}", req.workload)))?;
    let workload = match kind {
        WorkloadKind::Syscall => Workload::Syscall,
        WorkloadKind::CreatClo => Workload::CreatClo,
        WorkloadKind::Futimes => Workload::Futimes,
        WorkloadKind::FstatShared => Workload::FstatShared,
        WorkloadKind::ReadShared => Workload::ReadShared,
        WorkloadKind::OpenClose => Workload::OpenClose,
        WorkloadKind::StatPath => Workload::StatPath,
        WorkloadKind::Tree => {
            let path =
                tree.ok_or_else(|| Error::msg("bench-worker: tree workload without --tree"))?;
            let t = match host_tree {
                Some(t) => Arc::clone(t),
                None => Arc::clone(host_tree.insert(Arc::new(HostTree::read(path)?))),
            };
            Workload::Tree(t)
        }
    };
    let duration = Duration::try_from_secs_f64(req.duration_s)
        .map_err(|e| Error::new("bench-worker: duration", e))?;
    harness::run_one(target, &workload, req.threads, duration)
}

/// What the worker process runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wrapper {
    /// `uvfs run` (this binary's own `run` subcommand), the run directory on its tmpfs.
    UvfsRun,
    /// `proot` (found in `PATH`), the run directory on a host tmpfs.
    Proot,
}

/// A target whose workers run in a `uvfs bench-worker` process under a [`Wrapper`].
///
/// # Invariants
///
/// While `child` is `Some`, the worker process was started and not yet reaped, and
/// `stdin`/`stdout` are its pipes.
#[derive(Debug)]
pub struct WorkerProcess {
    /// `run` or `proot`.
    name: &'static str,
    /// The command line, for the output.
    command: String,
    /// The worker process; `None` once reaped.
    child: Option<Child>,
    /// Requests go here; `None` once closed.
    stdin: Option<ChildStdin>,
    /// Answers come from here.
    stdout: Option<ChildStdout>,
    /// Bytes read from `stdout` after the last answer's newline.
    pending: Vec<u8>,
    /// The worker process's stderr (and its wrapper's).
    log: tempfile::NamedTempFile,
    /// `proot`'s host tmpfs, removed after the process is gone.
    host: Option<HostDir>,
}

impl WorkerProcess {
    /// Starts `uvfs_bin bench-worker` under `wrapper`. `tree`: the `tree` workload's host
    /// tree, made visible to the worker (bound read-only under `uvfs run`). `host_dir`:
    /// `proot`'s directory (`--host-dir`; default a private tmpfs, see [`HostDir`]).
    ///
    /// # Errors
    ///
    /// The binary's directory is unknown, the tree cannot be resolved, the log file or
    /// host directory cannot be made, the process cannot be started, or it dies before
    /// answering a first request (a 0.01 s `syscall` run with one thread, which also
    /// checks that the wrapper works).
    pub fn start(
        wrapper: Wrapper,
        uvfs_bin: &Path,
        tree: Option<&Path>,
        host_dir: Option<&Path>,
    ) -> Result<WorkerProcess> {
        let name = match wrapper {
            Wrapper::UvfsRun => "run",
            Wrapper::Proot => "proot",
        };
        let tree = tree
            .map(|t| {
                t.canonicalize()
                    .with_context(|| format!("{name}: resolving the tree {}", t.display()))
            })
            .transpose()?;
        let mut host = None;
        let mut command = match wrapper {
            Wrapper::UvfsRun => {
                let dir = uvfs_bin.parent().ok_or_else(|| {
                    Error::msg(format!("run: {} has no directory", uvfs_bin.display()))
                })?;
                let file = uvfs_bin.file_name().ok_or_else(|| {
                    Error::msg(format!("run: {} has no file name", uvfs_bin.display()))
                })?;
                let mut c = Command::new(uvfs_bin);
                c.arg("run").arg("--bind").arg(bind_arg(dir, VIEW_BIN));
                if let Some(t) = &tree {
                    c.arg("--bind").arg(bind_arg(t, VIEW_TREE));
                }
                c.arg("--").arg(Path::new(VIEW_BIN).join(file)).args([
                    "bench-worker",
                    "--dir",
                    VIEW_DIR,
                ]);
                if tree.is_some() {
                    c.args(["--tree", VIEW_TREE]);
                }
                c
            }
            Wrapper::Proot => {
                let h = host.insert(HostDir::create(host_dir)?);
                let mut c = Command::new("proot");
                c.arg(uvfs_bin)
                    .arg("bench-worker")
                    .arg("--dir")
                    .arg(h.path());
                if let Some(t) = &tree {
                    c.arg("--tree").arg(t);
                }
                c
            }
        };
        let log = tempfile::Builder::new()
            .prefix("uvfs-bench-worker-")
            .suffix(".log")
            .tempfile()
            .with_context(|| format!("{name}: creating the worker's log file"))?;
        let stderr = log
            .as_file()
            .try_clone()
            .with_context(|| format!("{name}: opening the worker's log file"))?;
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .process_group(0);
        // SAFETY: the closure runs in the child between fork and exec, where only
        // async-signal-safe calls are allowed: it makes one `prctl` system call, without
        // allocating or taking a lock.
        unsafe {
            command.pre_exec(|| {
                rustix::process::set_parent_process_death_signal(Some(
                    rustix::process::Signal::KILL,
                ))
                .map_err(std::io::Error::from)
            });
        }
        let shown = format!(
            "{} {}",
            command.get_program().to_string_lossy(),
            command
                .get_args()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" ")
        );
        let mut child = command
            .spawn()
            .with_context(|| format!("{name}: starting {shown}"))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let mut process = WorkerProcess {
            name,
            command: shown,
            child: Some(child),
            stdin,
            stdout,
            pending: Vec::new(),
            log,
            host,
        };
        // A first short run: the wrapper works and the worker answers.
        process
            .ask(&Request {
                workload: WorkloadKind::Syscall.name().to_owned(),
                threads: 1,
                duration_s: 0.01,
            })
            .map_err(|e| Error::msg(format!("{name}: first run: {e}")))?;
        Ok(process)
    }

    /// Sends `req` and waits for its answer (polling, so that SIGINT/SIGTERM stop the
    /// wait: the worker is then killed).
    fn ask(&mut self, req: &Request) -> Result<f64> {
        let name = self.name;
        let mut line = serde_json::to_string(req)
            .map_err(|e| Error::new(format!("{name}: encoding a request"), e))?;
        line.push('\n');
        let deadline = Duration::try_from_secs_f64(req.duration_s)
            .unwrap_or_default()
            .saturating_add(ANSWER_SLACK);
        let asked = Instant::now();
        let (Some(stdin), Some(stdout)) = (self.stdin.as_mut(), self.stdout.as_mut()) else {
            return Err(Error::msg(format!("{name}: the worker process is closed")));
        };
        if let Err(e) = stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush())
        {
            return Err(Error::msg(format!(
                "{name}: the worker process is gone ({e}){}",
                self.stderr_tail()
            )));
        }
        loop {
            if let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
                let answer: Vec<u8> = self.pending.drain(..=end).collect();
                let answer: Answer = serde_json::from_slice(&answer).map_err(|e| {
                    Error::new(
                        format!(
                            "{name}: the worker's answer {:?}",
                            String::from_utf8_lossy(&answer)
                        ),
                        e,
                    )
                })?;
                return match (answer.rate, answer.error) {
                    (Some(rate), None) => Ok(rate),
                    (_, Some(e)) => Err(Error::msg(format!("{name} (worker process): {e}"))),
                    (None, None) => Err(Error::msg(format!("{name}: an empty answer"))),
                };
            }
            interrupt::check()?;
            if asked.elapsed() > deadline {
                return Err(Error::msg(format!(
                    "{name}: no answer from the worker process in {} s{}",
                    deadline.as_secs(),
                    self.stderr_tail()
                )));
            }
            let mut fds = [rustix::event::PollFd::new(
                &*stdout,
                rustix::event::PollFlags::IN,
            )];
            let timeout = rustix::event::Timespec {
                tv_sec: 0,
                tv_nsec: 100_000_000,
            };
            match rustix::event::poll(&mut fds, Some(&timeout)) {
                Ok(0) | Err(rustix::io::Errno::INTR) => continue,
                Ok(_) => {}
                Err(e) => return Err(Error::new(format!("{name}: poll"), e)),
            }
            let mut buf = [0u8; 4096];
            let n = stdout
                .read(&mut buf)
                .with_context(|| format!("{name}: reading the worker's answer"))?;
            if n == 0 {
                let status = self
                    .child
                    .as_mut()
                    .and_then(|c| c.wait().ok())
                    .map_or_else(|| "unknown".to_owned(), |s| s.to_string());
                self.child = None;
                return Err(Error::msg(format!(
                    "{name}: the worker process exited ({status}) before answering{}",
                    self.stderr_tail()
                )));
            }
            self.pending.extend_from_slice(&buf[..n]);
        }
    }

    /// Ends the worker process: closes its stdin (it closes its target and exits), waits
    /// up to [`EXIT_TIMEOUT`], else kills it; then removes `proot`'s host directory.
    fn release(&mut self) -> Result<()> {
        let name = self.name;
        drop(self.stdin.take());
        drop(self.stdout.take());
        let mut problem = None;
        if let Some(mut child) = self.child.take() {
            let pid = rustix::process::Pid::from_child(&child);
            let interrupted = interrupt::received().is_some();
            if interrupted {
                // Mid-run: SIGTERM to the group (the wrapper and the worker under it);
                // `uvfs run` then waits for its program and removes its directories.
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::TERM);
            }
            let start = Instant::now();
            let status = loop {
                match child.try_wait() {
                    Ok(Some(s)) => break Some(s),
                    Ok(None) if start.elapsed() < EXIT_TIMEOUT => {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    _ => break None,
                }
            };
            match status {
                Some(s) if s.success() || interrupted => {}
                Some(s) => {
                    problem = Some(format!("{name}: the worker process exited with {s}"));
                }
                None => {
                    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
                    let _ = child.kill();
                    let _ = child.wait();
                    problem = Some(format!(
                        "{name}: the worker process did not exit in {} s; killed",
                        EXIT_TIMEOUT.as_secs()
                    ));
                }
            }
        }
        let removed = self.host.take().map_or(Ok(()), HostDir::close);
        match problem {
            Some(p) => Err(Error::msg(format!("{p}{}", self.stderr_tail()))),
            None => removed,
        }
    }

    /// The last lines of the worker's stderr, as `": stderr: ..."`, or nothing.
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
        format!(": worker stderr: {}", tail.join(" | "))
    }
}

/// `HOST:VIEW:ro` for `uvfs run --bind`.
fn bind_arg(host: &Path, view: &str) -> std::ffi::OsString {
    let mut s = host.as_os_str().to_owned();
    s.push(format!(":{view}:ro"));
    s
}

impl Target for WorkerProcess {
    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> String {
        match &self.host {
            Some(h) => format!(
                "the kernel target's loops in `{}`, in {}",
                self.command,
                h.description()
            ),
            None => format!(
                "the kernel target's loops in `{}`, in {VIEW_DIR} on uvfs run's tmpfs",
                self.command
            ),
        }
    }

    fn setup(&mut self, _: &Workload, _: usize) -> Result<Vec<Box<dyn Worker + '_>>> {
        Err(Error::msg(format!(
            "{}: runs are measured in the worker process (measure_elsewhere)",
            self.name
        )))
    }

    fn teardown(&mut self) -> Result<()> {
        Ok(())
    }

    fn measure_elsewhere(
        &mut self,
        workload: &Workload,
        threads: usize,
        duration: Duration,
    ) -> Option<Result<f64>> {
        Some(self.ask(&Request {
            workload: workload.kind().name().to_owned(),
            threads,
            duration_s: duration.as_secs_f64(),
        }))
    }

    fn close(mut self: Box<Self>) -> Result<()> {
        self.release()
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        // Best effort on the error path; `close` reports failures.
        let _ = self.release();
    }
}

/// Finds `program` in `PATH`, as a shell would (the first executable regular file).
pub fn find_in_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| rustix::fs::access(p, rustix::fs::Access::EXEC_OK).is_ok() && p.is_file())
}

/// Notified calls per operation of `kind` under `uvfs run` (its seccomp filter,
/// crates/uvfs-run/src/supervisor.rs), where it is a fixed count: `syscall` 3 (`dup`,
/// `close` and `umask` are notified, `getpid` and `getuid` are not), `futimes` 2 (two
/// `utimensat` on a descriptor), `fstat-shared` and `read-shared` 1, `open-close` 2
/// (`openat`, `close`), `creat-clo` 3 (`openat`, `close`, `unlinkat`), `stat-path` 1
/// (`newfstatat`); `tree`: none (the reads per file depend on its size).
pub fn notified_per_op(kind: WorkloadKind) -> Option<u32> {
    match kind {
        WorkloadKind::Syscall | WorkloadKind::CreatClo => Some(3),
        WorkloadKind::Futimes | WorkloadKind::OpenClose => Some(2),
        WorkloadKind::FstatShared | WorkloadKind::ReadShared | WorkloadKind::StatPath => Some(1),
        WorkloadKind::Tree => None,
    }
}

/// The lines printed after the table when `report`'s subject is `run`: the time per
/// notified call at one thread (the worker thread is pinned to a CPU, as every target's;
/// `uvfs run`'s serving thread is not) and the issue's goals: at most
/// [`GOAL_US_PER_CALL`] us per notified call (on `fstat-shared`, one notified call per
/// operation), at least [`GOAL_OVER_MOUNT`]x `mount` on creat-clo and futimes, at least
/// [`GOAL_OVER_PROOT`]x `proot` on every workload (each where those targets ran).
pub fn goal_lines(report: &Report) -> Vec<String> {
    let mut lines = Vec::new();
    if report.targets.first().map(|t| t.name.as_str()) != Some("run") {
        return lines;
    }
    let median = |target: &str, kind: WorkloadKind, threads: usize| {
        report
            .results
            .iter()
            .map(|r| &r.series)
            .find(|s| s.target == target && s.workload == kind && s.threads == threads)
            .map(harness::Series::median)
            .filter(|&m| m > 0.0)
    };
    let mut per_call = Vec::new();
    for kind in report.settings.workloads.iter().copied() {
        let (Some(n), Some(rate)) = (notified_per_op(kind), median("run", kind, 1)) else {
            continue;
        };
        per_call.push(format!(
            "{kind} {:.2} us ({n} per op)",
            1e6 / rate / f64::from(n)
        ));
    }
    if !per_call.is_empty() {
        lines.push(format!(
            "run: time per notified call at 1 thread (the op's whole time over its notified \
             calls): {}",
            per_call.join(", ")
        ));
    }
    // The bare supervisor's time per call, where `seccomp-floor` ran: what the kernel's
    // round trip alone costs on this machine.
    let floor =
        median("seccomp-floor", WorkloadKind::FstatShared, 1).map_or_else(String::new, |rate| {
            format!(
                " (seccomp-floor, a supervisor that only answers, on this machine: {:.2} us)",
                1e6 / rate
            )
        });
    match median("run", WorkloadKind::FstatShared, 1) {
        Some(rate) => {
            let us = 1e6 / rate;
            lines.push(format!(
                "goal: <= {GOAL_US_PER_CALL} us per notified call (fstat-shared, 1 thread, \
                 pinned): {}: {us:.2} us{floor}",
                if us <= GOAL_US_PER_CALL {
                    "met"
                } else {
                    "not met"
                }
            ));
        }
        None => lines.push(format!(
            "goal: <= {GOAL_US_PER_CALL} us per notified call: not measured (needs \
             fstat-shared at 1 thread)"
        )),
    }
    let ratio_goal = |peer: &str, goal: f64, workloads: &[WorkloadKind], what: &str| {
        if !report.targets.iter().any(|t| t.name == peer) {
            return format!(
                "goal: run >= {goal}x {peer} on {what}: not measured ({peer} did not run)"
            );
        }
        let mut rows = 0;
        let mut missed = Vec::new();
        for &workload in workloads
            .iter()
            .filter(|w| report.settings.workloads.contains(w))
        {
            for &threads in &report.settings.threads {
                rows += 1;
                let ratio = report
                    .ratios
                    .iter()
                    .find(|r| r.workload == workload && r.threads == threads && r.peer == peer);
                match ratio {
                    Some(r) if r.ratio >= goal => {}
                    Some(r) => missed.push(format!("{workload} {threads}t {:.2}x", r.ratio)),
                    None => missed.push(format!("{workload} {threads}t not measured")),
                }
            }
        }
        format!(
            "goal: run >= {goal}x {peer} on {what}: {}",
            if rows == 0 {
                "not measured (no such workload ran)".to_owned()
            } else if missed.is_empty() {
                format!("met on {rows} of {rows} rows")
            } else {
                format!(
                    "not met on {} of {rows} rows: {}",
                    missed.len(),
                    missed.join(", ")
                )
            }
        )
    };
    lines.push(ratio_goal(
        "mount",
        GOAL_OVER_MOUNT,
        &GOAL_MOUNT_WORKLOADS,
        "creat-clo and futimes",
    ));
    lines.push(ratio_goal(
        "proot",
        GOAL_OVER_PROOT,
        &WorkloadKind::ALL,
        "every workload",
    ));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::Series;
    use crate::report::{Machine, Settings, TargetInfo};

    /// A report of `targets` on `workloads` at 1 and 2 threads, every rate `rate(target,
    /// workload)`.
    fn report(
        targets: &[&str],
        workloads: &[WorkloadKind],
        rate: impl Fn(&str, WorkloadKind) -> f64,
    ) -> Report {
        let mut series = Vec::new();
        for &workload in workloads {
            for threads in [1, 2] {
                for name in targets {
                    series.push(Series {
                        target: (*name).to_owned(),
                        workload,
                        unit: workload.unit(),
                        threads,
                        warmup: 1.0,
                        reps: vec![rate(name, workload)],
                    });
                }
            }
        }
        Report::new(
            Machine {
                cores: 2,
                cpu: String::new(),
                kernel: String::new(),
            },
            Settings {
                workloads: workloads.to_vec(),
                threads: vec![1, 2],
                reps: 1,
                duration_s: 1.0,
                warmup_s: 0.25,
            },
            targets
                .iter()
                .map(|n| TargetInfo {
                    name: (*n).to_owned(),
                    description: String::new(),
                })
                .collect(),
            None,
            series,
        )
    }

    /// The worker's side: a request runs on the kernel target and answers its rate; a bad
    /// request is an error to answer, and the target still serves the next one.
    #[test]
    fn serve_one_runs_requests_and_refuses_bad_ones() {
        let parent = tempfile::tempdir().unwrap();
        let mut target = KernelTarget::new(HostDir::create(Some(parent.path())).unwrap()).unwrap();
        let mut tree = None;
        let ok = r#"{"workload":"syscall","threads":2,"duration_s":0.02}"#;
        assert!(serve_one(&mut target, &mut tree, None, ok).unwrap() > 0.0);
        let e = serve_one(
            &mut target,
            &mut tree,
            None,
            r#"{"workload":"nope","threads":1,"duration_s":0.02}"#,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), r#"bench-worker: no workload "nope""#);
        let e = serve_one(
            &mut target,
            &mut tree,
            None,
            r#"{"workload":"tree","threads":1,"duration_s":0.02}"#,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "bench-worker: tree workload without --tree");
        assert!(serve_one(&mut target, &mut tree, None, "{").is_err());
        assert!(serve_one(&mut target, &mut tree, None, ok).unwrap() > 0.0);
        Box::new(target).close().unwrap();
    }

    #[test]
    fn goal_lines_name_the_rows_that_miss() {
        let workloads = [
            WorkloadKind::Syscall,
            WorkloadKind::Futimes,
            WorkloadKind::FstatShared,
        ];
        let r = report(&["run", "kernel", "mount", "proot"], &workloads, |t, w| {
            match (t, w) {
                ("run", WorkloadKind::FstatShared) => 250_000.0, // 4 us per call
                ("run", _) => 100_000.0,
                ("mount", WorkloadKind::Futimes) => 50_000.0, // 2x: missed
                ("proot", WorkloadKind::Syscall) => 10_000.0, // 10x: met
                ("proot", _) => 50_000.0,                     // 2x, 5x: missed
                _ => 1_000_000.0,
            }
        });
        let lines = goal_lines(&r);
        assert_eq!(
            lines[0],
            "run: time per notified call at 1 thread (the op's whole time over its notified \
             calls): syscall 3.33 us (3 per op), futimes 5.00 us (2 per op), fstat-shared \
             4.00 us (1 per op)"
        );
        assert_eq!(
            lines[1],
            "goal: <= 5 us per notified call (fstat-shared, 1 thread, pinned): met: 4.00 us"
        );
        assert_eq!(
            lines[2],
            "goal: run >= 3x mount on creat-clo and futimes: not met on 2 of 2 rows: \
             futimes 1t 2.00x, futimes 2t 2.00x"
        );
        assert_eq!(
            lines[3],
            "goal: run >= 5x proot on every workload: not met on 2 of 6 rows: futimes 1t \
             2.00x, futimes 2t 2.00x"
        );
        // With the bare supervisor beside it, its time per call is named in the goal.
        let with_floor = report(&["run", "seccomp-floor"], &workloads, |t, _| match t {
            "run" => 125_000.0, // 8 us per call
            _ => 200_000.0,     // 5 us per call
        });
        assert_eq!(
            goal_lines(&with_floor)[1],
            "goal: <= 5 us per notified call (fstat-shared, 1 thread, pinned): not met: \
             8.00 us (seccomp-floor, a supervisor that only answers, on this machine: 5.00 us)"
        );
        // Another subject: no lines; a missing peer: not measured.
        assert!(goal_lines(&report(&["kernel", "run"], &workloads, |_, _| 1.0)).is_empty());
        let alone = goal_lines(&report(&["run", "kernel"], &workloads, |_, _| 1.0));
        assert!(
            alone[2].ends_with("not measured (mount did not run)"),
            "{alone:?}"
        );
    }
}
