//! `uvfs bench --target run,proot`: the real binary runs the kernel target's loops in a
//! `uvfs bench-worker` process under `uvfs run` (and under `proot` where it is installed),
//! interleaved with the kernel target, reports the ratios and the goal lines, and
//! leaves nothing behind: no worker process, no directory, after a normal end and after
//! Ctrl-C.
//!
//! Each test runs the benchmark with `TMPDIR` set to a fresh directory and its `--tree`
//! inside it, so that every worker process names that directory on its command line. A
//! test prints why and returns where `uvfs run` cannot run a program here.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use rustix::process::{kill_process, Pid, Signal};

const UVFS: &str = env!("CARGO_BIN_EXE_uvfs");

/// Why `uvfs run` cannot run a program on this machine, if it cannot.
fn cannot_run() -> Option<String> {
    let out = Command::new(UVFS)
        .args(["run", "--", "true"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (!out.status.success()).then(|| {
        format!(
            "uvfs run -- true: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })
}

/// A small tree for the `tree` workload in `tmp/tree`.
fn small_tree(tmp: &Path) -> String {
    let tree = tmp.join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::write(tree.join("a.h"), vec![b'a'; 10_000]).unwrap();
    std::fs::write(tree.join("sub/b.h"), b"int b;\n").unwrap();
    tree.to_string_lossy().into_owned()
}

/// `uvfs bench ARGS` with `TMPDIR=tmp`.
fn bench(tmp: &Path, args: &[&str]) -> Output {
    Command::new(UVFS)
        .arg("bench")
        .args(args)
        .env("TMPDIR", tmp)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// What is left in `tmp` besides the tree.
fn left(tmp: &Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "tree")
        .collect()
}

/// Processes whose command line names `tmp` (a worker left running).
fn processes_naming(tmp: &Path) -> Vec<String> {
    let needle = tmp.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(&needle) && cmdline.contains("bench-worker") {
                found.push(cmdline);
            }
        }
    }
    found
}

/// `run` and `proot` beside `kernel` and `seccomp-floor`: every row measured (the floor's
/// on `fstat-shared` only), the ratios to the kernel, the time per notified call and the
/// goal lines printed (the floor's time named in the first), nothing left.
#[test]
fn run_and_proot_report_ratios_and_goals() {
    if let Some(why) = cannot_run() {
        eprintln!("skipping: {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let tree = small_tree(tmp.path());
    let out = bench(
        tmp.path(),
        &[
            "--target",
            "run,kernel,proot,seccomp-floor",
            "--workload",
            "syscall,tree,fstat-shared",
            "--tree",
            &tree,
            "--threads",
            "1,2",
            "--duration",
            "0.02",
            "--reps",
            "1",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("\nrun: the kernel target's loops in `"),
        "{stdout}"
    );
    assert!(
        stdout.contains(" bench-worker --dir /tmp --tree /uvfs-bench/tree`"),
        "{stdout}"
    );
    assert!(stdout.contains("run/kernel"), "{stdout}");
    assert!(
        stdout.contains("\nrun: time per notified call at 1 thread"),
        "{stdout}"
    );
    assert!(
        stdout.contains("\ngoal: <= 5 us per notified call (fstat-shared, 1 thread, pinned): "),
        "{stdout}"
    );
    assert!(
        stdout.contains(" us (seccomp-floor, a supervisor that only answers, on this machine: "),
        "{stdout}"
    );
    assert!(stdout.contains("run/seccomp-floor"), "{stdout}");
    assert!(
        stdout.contains("\ngoal: run >= 3x mount on creat-clo and futimes: not measured"),
        "{stdout}"
    );
    if stdout.contains("skipping proot: ") {
        assert!(stdout.contains("goal: run >= 5x proot on every workload: not measured"));
    } else {
        assert!(stdout.contains("run/proot"), "{stdout}");
        assert!(
            stdout.contains("\ngoal: run >= 5x proot on every workload: "),
            "{stdout}"
        );
        assert!(!stdout.contains("proot did not run"), "{stdout}");
    }
    assert!(
        left(tmp.path()).is_empty(),
        "left behind: {:?}",
        left(tmp.path())
    );
    assert!(
        processes_naming(tmp.path()).is_empty(),
        "{:?}",
        processes_naming(tmp.path())
    );
}

/// SIGINT during a `run` target's run: exit 130 with "interrupted by SIGINT", the worker
/// process and `uvfs run` gone, every directory removed.
#[test]
fn sigint_during_a_run_target_run_stops_the_worker() {
    if let Some(why) = cannot_run() {
        eprintln!("skipping: {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let tree = small_tree(tmp.path());
    let mut child = Command::new(UVFS)
        .args([
            "bench",
            "--target",
            "run,kernel",
            "--workload",
            "creat-clo,tree",
        ])
        .args(["--tree", &tree])
        .args(["--threads", "1", "--duration", "600", "--reps", "1"])
        .env("TMPDIR", tmp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    // The header's last target line: the worker process answered its first run.
    while !line.starts_with("kernel: ") {
        line.clear();
        assert_ne!(stdout.read_line(&mut line).unwrap(), 0, "no header");
    }
    assert!(
        !processes_naming(tmp.path()).is_empty(),
        "no worker running"
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    kill_process(Pid::from_child(&child), Signal::INT).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.trim_end().ends_with("interrupted by SIGINT"),
        "{stderr}"
    );
    assert!(
        left(tmp.path()).is_empty(),
        "left behind: {:?}",
        left(tmp.path())
    );
    assert!(
        processes_naming(tmp.path()).is_empty(),
        "{:?}",
        processes_naming(tmp.path())
    );
}
