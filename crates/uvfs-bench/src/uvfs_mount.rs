//! The `mount` target: the workloads through real system calls in a fresh
//! `uvfs mount` (uvfs's tmpfs served over FUSE by the `uvfs` binary), the
//! subject of `uvfs bench --target mount`.
//!
//! Linux analogue: a FUSE file system (fs/fuse) whose daemon is uvfs. The
//! workers are the kernel target's ([`crate::kernel`]): each call goes
//! through the kernel's VFS and FUSE client to the server's threads and
//! back, so the rates measure uvfs *behind* FUSE, against libfuse's
//! `passthrough_ll` over a tmpfs ([`crate::passthrough_ll`]) and the kernel's
//! own tmpfs in the same run.
//!
//! The server is the benchmark's own executable (`std::env::current_exe`,
//! the `uvfs` binary) run as `uvfs mount DIR --threads N`; see
//! [`crate::fuse_mount`] for how it is started and always stopped.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Context as _, Result};
use crate::fuse_mount::FuseMount;
use crate::kernel::KernelDir;
use crate::report::Report;

/// The FUSE subtype `uvfs mount` shows in mountinfo: type `fuse.uvfs`, or
/// (mounted by root, fuser's direct `mount(2)`) type `fuse`, source `uvfs`.
pub const SUBTYPE: &str = "uvfs";

/// The goal: `mount` at least this many times `passthrough-ll` on
/// every workload at 1 and 2 threads.
pub const GOAL_RATIO: f64 = 1.5;

/// The thread counts the goal is stated for.
pub const GOAL_THREADS: [usize; 2] = [1, 2];

/// A running `uvfs mount`, as the directory of a
/// [`KernelTarget`](crate::kernel::KernelTarget).
#[derive(Debug)]
pub struct UvfsMount {
    /// The server and its mount point.
    mount: FuseMount,
    /// The server command, for the output.
    command: String,
}

impl UvfsMount {
    /// Starts `program mount MOUNTPOINT --threads threads` on a fresh mount
    /// point and waits for its FUSE mount ([`SUBTYPE`]).
    ///
    /// # Errors
    ///
    /// See [`FuseMount::start`]; e.g. `program` has no `mount` subcommand
    /// (the error quotes its stderr), or the kernel has no FUSE.
    pub fn start(program: &Path, threads: usize) -> Result<UvfsMount> {
        UvfsMount::start_with(program, threads, &[])
    }

    /// [`UvfsMount::start`] with more options for `uvfs mount` (`extra`, e.g.
    /// `["--permissions", "uvfs"]`).
    ///
    /// # Errors
    ///
    /// See [`UvfsMount::start`].
    pub fn start_with(program: &Path, threads: usize, extra: &[&str]) -> Result<UvfsMount> {
        let mount = FuseMount::start("uvfs mount", SUBTYPE, &[0], |dir| {
            let mut c = Command::new(program);
            c.arg("mount")
                .arg(dir)
                .args(["--threads", &threads.to_string()])
                .args(extra);
            c
        })?;
        let extra = extra.iter().map(|a| format!(" {a}")).collect::<String>();
        Ok(UvfsMount {
            command: format!("uvfs mount --threads {threads}{extra}, pid {}", mount.pid()),
            mount,
        })
    }

    /// [`UvfsMount::start`] with this process's own executable (the `uvfs`
    /// binary) as the server.
    ///
    /// # Errors
    ///
    /// The executable's path is unknown, or see [`UvfsMount::start`].
    pub fn start_self(threads: usize, extra: &[&str]) -> Result<UvfsMount> {
        let exe: PathBuf =
            std::env::current_exe().with_context(|| "uvfs mount: finding the uvfs executable")?;
        UvfsMount::start_with(&exe, threads, extra)
    }
}

impl KernelDir for UvfsMount {
    fn path(&self) -> &Path {
        self.mount.path()
    }

    fn description(&self) -> String {
        format!(
            "uvfs mount (FUSE server `{}`) {}",
            self.command,
            self.mount.location()
        )
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.mount.close()
    }
}

/// The goal line printed after the table when `report`'s subject is `mount`
/// and `passthrough-ll` ran: whether `mount` is at least [`GOAL_RATIO`] times
/// `passthrough-ll` on every workload at 1 and 2 threads, and the rows that
/// miss it; `None` otherwise.
pub fn goal(report: &Report) -> Option<String> {
    let subject = report.targets.first().map(|t| t.name.as_str());
    if subject != Some("mount") || !report.targets.iter().any(|t| t.name == "passthrough-ll") {
        return None;
    }
    let mut rows = 0;
    let mut missed = Vec::new();
    for threads in GOAL_THREADS
        .into_iter()
        .filter(|t| report.settings.threads.contains(t))
    {
        for &workload in &report.settings.workloads {
            rows += 1;
            let ratio = report.ratios.iter().find(|r| {
                r.workload == workload && r.threads == threads && r.peer == "passthrough-ll"
            });
            match ratio {
                Some(r) if r.ratio >= GOAL_RATIO => {}
                Some(r) => missed.push(format!("{workload} {threads}t {:.2}x", r.ratio)),
                None => missed.push(format!("{workload} {threads}t not measured")),
            }
        }
    }
    let mut line = format!(
        "goal: mount >= {GOAL_RATIO}x passthrough-ll on every workload at 1 and 2 threads: {}",
        if missed.is_empty() {
            format!("met on {rows} of {rows} rows")
        } else {
            format!(
                "not met on {} of {rows} rows: {}",
                missed.len(),
                missed.join(", ")
            )
        }
    );
    let untried: Vec<String> = GOAL_THREADS
        .iter()
        .filter(|t| !report.settings.threads.contains(t))
        .map(|t| format!("{t}t"))
        .collect();
    if !untried.is_empty() {
        line.push_str(&format!(" ({} not run)", untried.join(", ")));
    }
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::Series;
    use crate::report::{Machine, Settings, TargetInfo};
    use crate::workloads::WorkloadKind;
    use std::os::unix::fs::PermissionsExt as _;

    /// A report of `targets` with one syscall series per (target, threads):
    /// `rates[t][i]` for target `t` at `threads[i]`.
    fn report(targets: &[&str], threads: &[usize], rates: &[&[f64]]) -> Report {
        let mut series = Vec::new();
        for (t, name) in targets.iter().enumerate() {
            for (i, &n) in threads.iter().enumerate() {
                series.push(Series {
                    target: (*name).to_owned(),
                    workload: WorkloadKind::Syscall,
                    unit: "lps",
                    threads: n,
                    warmup: 1.0,
                    reps: vec![rates[t][i]],
                });
            }
        }
        Report::new(
            Machine {
                cores: 2,
                cpu: String::new(),
                kernel: String::new(),
            },
            Settings {
                workloads: vec![WorkloadKind::Syscall],
                threads: threads.to_vec(),
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

    #[test]
    fn goal_line_names_the_rows_that_miss() {
        let met = report(
            &["mount", "passthrough-ll", "kernel"],
            &[1, 2],
            &[&[30.0, 40.0], &[10.0, 20.0], &[1.0, 1.0]],
        );
        assert_eq!(
            goal(&met).unwrap(),
            "goal: mount >= 1.5x passthrough-ll on every workload at 1 and 2 threads: \
             met on 2 of 2 rows"
        );
        let missed = report(
            &["mount", "passthrough-ll"],
            &[1, 2, 4],
            &[&[30.0, 25.0, 1.0], &[10.0, 20.0, 10.0]],
        );
        assert_eq!(
            goal(&missed).unwrap(),
            "goal: mount >= 1.5x passthrough-ll on every workload at 1 and 2 threads: \
             not met on 1 of 2 rows: syscall 2t 1.25x"
        );
        let one = report(&["mount", "passthrough-ll"], &[1], &[&[30.0], &[10.0]]);
        assert!(goal(&one)
            .unwrap()
            .ends_with("met on 1 of 1 rows (2t not run)"));
        // No passthrough-ll (skipped), or another subject: no line.
        assert_eq!(
            goal(&report(&["mount", "kernel"], &[1], &[&[1.0], &[1.0]])),
            None
        );
        assert_eq!(
            goal(&report(
                &["uvfs", "passthrough-ll"],
                &[1],
                &[&[1.0], &[1.0]]
            )),
            None
        );
    }

    /// The server is started as `PROGRAM mount DIR --threads N` and waited
    /// for as a `fuse.uvfs` mount; closing stops it (exit 0 on SIGTERM) and
    /// removes the mount point. The server here is a stand-in: a script that
    /// records its arguments and serves the mount with libfuse's
    /// passthrough_ll under the subtype `uvfs`.
    #[test]
    fn starts_program_mount_dir_threads() {
        if !Path::new("/dev/fuse").exists() {
            eprintln!("skipping: no /dev/fuse");
            return;
        }
        let build = match crate::passthrough_ll::Build::new() {
            Ok(b) => b,
            Err(why) => {
                eprintln!("skipping: {why}");
                return;
            }
        };
        let dir = tempfile::tempdir().unwrap();
        let args = dir.path().join("args");
        let source = dir.path().join("source");
        std::fs::create_dir(&source).unwrap();
        let script = dir.path().join("uvfs");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\n\
                 echo \"$@\" > {args}\n\
                 trap 'kill -TERM $!; wait $!; exit 0' TERM\n\
                 {server} -f -o subtype=uvfs,source={source} \"$2\" &\n\
                 wait $!\n",
                args = args.display(),
                server = build.binary().display(),
                source = source.display(),
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        // The trap before the server: the mount can appear, and the test close it, before
        // a shell on a loaded machine reached a trap set after starting it (CI saw the
        // script killed by its SIGTERM: "stopped with signal 15 after SIGTERM").

        let mount = UvfsMount::start(&script, 3).unwrap();
        let path = mount.path().to_path_buf();
        assert_eq!(
            std::fs::read_to_string(&args).unwrap(),
            format!("mount {} --threads 3\n", path.display())
        );
        assert!(
            mount.description().contains("uvfs mount --threads 3"),
            "{}",
            mount.description()
        );
        std::fs::write(path.join("f"), b"x").unwrap();
        assert!(source.join("f").exists());
        Box::new(mount).close().unwrap();
        assert!(!path.exists());
    }
}
