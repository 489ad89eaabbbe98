//! `uvfs bench` stopped by SIGINT or SIGTERM: it exits with `128 + signal`
//! and one line saying so, after removing the kernel peer's directory.
//!
//! Bug: a signal killed the process before its cleanup, leaving
//! `/tmp/uvfs-bench-*` (and, with `--host-dir`, the run's subdirectory)
//! behind. Fix: handlers that raise the run's stop flag (uvfs-bench's
//! `interrupt` module), so teardown and close still run.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use rustix::process::{kill_process, Pid, Signal};

/// Starts a long benchmark, waits until its header is printed (signal
/// handlers installed, host directory made, run starting), sends `signal`,
/// and checks the exit status, the message and that nothing is left.
fn interrupted_run_cleans_up(signal: Signal, name: &str, status: i32) {
    let host = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_uvfs"))
        .args(["bench", "--target", "kernel", "--workload", "syscall"])
        .args(["--threads", "1", "--duration", "600", "--reps", "1"])
        .arg("--host-dir")
        .arg(host.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("kernel: ") {
        line.clear();
        assert_ne!(stdout.read_line(&mut line).unwrap(), 0, "no header");
    }
    // The directory the run made, while it runs.
    assert_eq!(std::fs::read_dir(host.path()).unwrap().count(), 1);
    kill_process(Pid::from_child(&child), signal).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(status), "{stderr}");
    assert!(
        stderr
            .trim_end()
            .ends_with(&format!("interrupted by {name}")),
        "{stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(host.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn sigint_stops_cleans_up_and_exits_130() {
    interrupted_run_cleans_up(Signal::INT, "SIGINT", 130);
}

#[test]
fn sigterm_stops_cleans_up_and_exits_143() {
    interrupted_run_cleans_up(Signal::TERM, "SIGTERM", 143);
}
