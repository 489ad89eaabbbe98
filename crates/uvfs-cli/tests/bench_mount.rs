//! `uvfs bench --target mount`: the real binary runs the workloads in a
//! fresh `uvfs mount` (itself, as the FUSE server), in libfuse's
//! `passthrough_ll` and on the kernel's tmpfs, and leaves nothing behind:
//! no mount point, no server, no directory, after a normal end and after
//! Ctrl-C.
//!
//! Each test runs the benchmark with `TMPDIR` set to a fresh directory, so
//! everything it makes (mount points, passthrough_ll's build, the tmpfs
//! directories) must be gone from there at the end. A test prints why and
//! returns where the machine cannot run it: no `/dev/fuse`, no `uvfs mount`
//! subcommand, no libfuse3-dev examples (the benchmark then says "skipping
//! passthrough-ll").

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use rustix::process::{kill_process, Pid, Signal};

const UVFS: &str = env!("CARGO_BIN_EXE_uvfs");

/// Why this machine cannot run a FUSE benchmark with `targets`, if it
/// cannot.
fn cannot_run(targets: &str) -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("no /dev/fuse".to_owned());
    }
    if targets.contains("mount") {
        let help = Command::new(UVFS)
            .args(["mount", "--help"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        if !help.success() {
            return Some("this uvfs has no `mount` subcommand".to_owned());
        }
    }
    None
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

/// What is left in `tmp`.
fn left(tmp: &Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Processes whose command line names `tmp` (a server left running).
fn servers_in(tmp: &Path) -> Vec<String> {
    let needle = tmp.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(&needle) {
                found.push(cmdline);
            }
        }
    }
    found
}

/// `--target mount` alone runs mount, mount-uvfs-perms, passthrough-ll (when
/// it can be built) and kernel, reports the ratios and the goal line, and cleans up.
#[test]
fn mount_alone_means_mount_passthrough_and_kernel() {
    if let Some(why) = cannot_run("mount") {
        eprintln!("skipping: {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = bench(
        tmp.path(),
        &[
            "--target",
            "mount",
            "--workload",
            "creat-clo,read-shared",
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
    assert!(stdout.contains("\nmount: "), "{stdout}");
    assert!(stdout.contains("uvfs mount (FUSE server"), "{stdout}");
    assert!(stdout.contains("mount/kernel"), "{stdout}");
    assert!(stdout.contains("\nmount-uvfs-perms: "), "{stdout}");
    assert!(stdout.contains("--permissions uvfs"), "{stdout}");
    assert!(stdout.contains("mount/mount-uvfs-perms"), "{stdout}");
    if stdout.contains("skipping passthrough-ll: ") {
        assert!(!stdout.contains("goal: "), "{stdout}");
    } else {
        assert!(stdout.contains("mount/passthrough-ll"), "{stdout}");
        assert!(
            stdout.contains("\ngoal: mount >= 1.5x passthrough-ll"),
            "{stdout}"
        );
    }
    assert!(
        left(tmp.path()).is_empty(),
        "left behind: {:?}",
        left(tmp.path())
    );
    assert!(
        servers_in(tmp.path()).is_empty(),
        "{:?}",
        servers_in(tmp.path())
    );
}

/// SIGINT while `targets` run: exit 130 with "interrupted by SIGINT", after
/// the servers are stopped and every directory removed.
fn interrupted_fuse_run_cleans_up(targets: &str) {
    if let Some(why) = cannot_run(targets) {
        eprintln!("skipping: {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(UVFS)
        .args(["bench", "--target", targets, "--workload", "creat-clo"])
        .args(["--threads", "1", "--duration", "600", "--reps", "1"])
        .env("TMPDIR", tmp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    // The header's last target line: every server is mounted, the run starts.
    while !line.starts_with("kernel: ") {
        line.clear();
        assert_ne!(stdout.read_line(&mut line).unwrap(), 0, "no header");
        if line.starts_with("skipping passthrough-ll: ") {
            eprintln!("skipping: {}", line.trim_end());
            let _ = kill_process(Pid::from_child(&child), Signal::KILL);
            let _ = child.wait();
            return;
        }
    }
    assert!(!servers_in(tmp.path()).is_empty(), "no server running");
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
        servers_in(tmp.path()).is_empty(),
        "{:?}",
        servers_in(tmp.path())
    );
}

#[test]
fn sigint_during_a_mount_run_stops_the_servers() {
    interrupted_fuse_run_cleans_up("mount,passthrough-ll,kernel");
}

#[test]
fn sigint_during_a_passthrough_ll_run_stops_it() {
    interrupted_fuse_run_cleans_up("passthrough-ll,kernel");
}
