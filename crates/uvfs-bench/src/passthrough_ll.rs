//! The `passthrough-ll` target: the workloads through real system calls in a
//! FUSE mount served by libfuse's `passthrough_ll` example over a private
//! tmpfs, the baseline that `uvfs mount` is measured against.
//!
//! Linux analogue: a FUSE file system (fs/fuse) whose daemon forwards every
//! request to another file system (here the kernel's tmpfs) by `openat`,
//! `fstatat`, `read`, ... on file descriptors it keeps per inode.
//!
//! `passthrough_ll` is built when the benchmark starts, from the installed
//! libfuse3-dev examples ([`EXAMPLES`]), with
//! `gcc -O2 -Wall $(pkg-config --cflags fuse3) passthrough_ll.c -o passthrough_ll
//! $(pkg-config --libs fuse3)` (the example's own build line plus `-O2`) into
//! a temporary directory removed at the end. When the source, `pkg-config
//! fuse3` or gcc is missing, or the build fails, [`Build::new`] says why and
//! the benchmark skips the target.
//!
//! It is run as `passthrough_ll -f -o source=SRC,clone_fd MOUNTPOINT`, SRC a
//! fresh [`HostDir`] (a private tmpfs, as the kernel target's):
//!
//! - `-f`: in the foreground, a child of the benchmark that SIGTERM stops;
//! - multi-threaded (no `-s`): libfuse's worker pool, threads started on
//!   demand up to its default of 10 (the example's `FUSE_USE_VERSION 34`
//!   loop config has no thread limit to pass);
//! - `clone_fd`: one `/dev/fuse` fd per worker thread, libfuse's documented
//!   "may improve performance" option: the baseline's best threading;
//! - caching as by default (`cache=auto`): entries and attributes cached by
//!   the kernel for 1 s, page cache dropped at each open, no writeback
//!   cache, no xattrs, no flock.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Context as _, Result};
use crate::fuse_mount::FuseMount;
use crate::kernel::{HostDir, KernelDir};

/// Where Debian's (and Ubuntu's) libfuse3-dev installs its examples.
pub const EXAMPLES: &str = "/usr/share/doc/libfuse3-dev/examples";

/// The compiler flags besides pkg-config's.
pub const CFLAGS: [&str; 2] = ["-O2", "-Wall"];

/// The FUSE subtype `passthrough_ll` shows in mountinfo (libfuse sets it to
/// the program's name: type `fuse.passthrough_ll`).
pub const SUBTYPE: &str = "passthrough_ll";

/// `passthrough_ll`'s options besides `-f` and the mount point (`source=` is
/// added before them).
pub const OPTIONS: &str = "clone_fd";

/// A built `passthrough_ll`.
#[derive(Debug)]
pub struct Build {
    /// The temporary directory holding the binary.
    dir: tempfile::TempDir,
    /// The compile command as run, for the output.
    command: String,
    /// `pkg-config --modversion fuse3`.
    libfuse: String,
}

impl Build {
    /// Builds `passthrough_ll` from [`EXAMPLES`] into a temporary directory.
    ///
    /// # Errors
    ///
    /// Why it cannot be built (source, `pkg-config fuse3` or gcc missing,
    /// compile error), as one line to print before skipping the target.
    pub fn new() -> std::result::Result<Build, String> {
        Build::from(Path::new(EXAMPLES))
    }

    /// [`Build::new`] from the examples in `examples`.
    fn from(examples: &Path) -> std::result::Result<Build, String> {
        let source = examples.join("passthrough_ll.c");
        for file in [&source, &examples.join("passthrough_helpers.h")] {
            if !file.is_file() {
                return Err(format!(
                    "{} not found (the libfuse3-dev examples)",
                    file.display()
                ));
            }
        }
        let pkg = |arg: &str| -> std::result::Result<String, String> {
            let out = Command::new("pkg-config")
                .args([arg, "fuse3"])
                .output()
                .map_err(|e| format!("pkg-config {arg} fuse3: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "pkg-config {arg} fuse3: {}: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        };
        let cflags = pkg("--cflags")?;
        let libs = pkg("--libs")?;
        let libfuse = pkg("--modversion")?;
        let dir = tempfile::Builder::new()
            .prefix("uvfs-bench-passthrough-ll-")
            .tempdir()
            .map_err(|e| format!("creating a build directory: {e}"))?;
        let binary = dir.path().join("passthrough_ll");
        let mut args: Vec<String> = CFLAGS.iter().map(|s| (*s).to_owned()).collect();
        args.extend(cflags.split_whitespace().map(str::to_owned));
        args.push(source.display().to_string());
        args.push("-o".to_owned());
        args.push(binary.display().to_string());
        args.extend(libs.split_whitespace().map(str::to_owned));
        let command = format!("gcc {}", args.join(" "));
        let out = Command::new("gcc")
            .args(&args)
            .output()
            .map_err(|e| format!("{command}: {e}"))?;
        if !out.status.success() || !binary.is_file() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
            return Err(format!(
                "{command}: {}: {}",
                out.status,
                tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
            ));
        }
        Ok(Build {
            dir,
            command,
            libfuse,
        })
    }

    /// `pkg-config --modversion fuse3` of the build, e.g. `3.14.0`.
    pub fn libfuse(&self) -> &str {
        &self.libfuse
    }

    /// The compile command as run.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// The binary.
    pub fn binary(&self) -> PathBuf {
        self.dir.path().join("passthrough_ll")
    }
}

/// A running `passthrough_ll` over a private tmpfs, as the directory of a
/// [`KernelTarget`](crate::kernel::KernelTarget).
#[derive(Debug)]
pub struct PassthroughLl {
    /// The server and its mount point; goes first.
    mount: FuseMount,
    /// The directory it serves (`-o source=`); goes after the server.
    source: HostDir,
    /// The binary; goes last.
    build: Build,
}

impl PassthroughLl {
    /// Makes the source directory ([`HostDir::create`] with `host_dir`, as
    /// for the kernel target: a private tmpfs by default) and mounts it
    /// with `build`'s `passthrough_ll` (see the module doc for the options).
    ///
    /// # Errors
    ///
    /// The source directory cannot be made, or see [`FuseMount::start`].
    pub fn start(build: Build, host_dir: Option<&Path>) -> Result<PassthroughLl> {
        let source = HostDir::create(host_dir)?;
        let binary = build.binary();
        // Exit code 1 is libfuse's loop returning the signal that stopped it.
        let mount = FuseMount::start("passthrough_ll", SUBTYPE, &[0, 1], |dir| {
            let mut c = Command::new(&binary);
            c.arg("-f")
                .arg("-o")
                .arg(format!("source={},{OPTIONS}", source.path().display()))
                .arg(dir);
            c
        })
        .with_context(|| "passthrough-ll")?;
        Ok(PassthroughLl {
            mount,
            source,
            build,
        })
    }
}

impl KernelDir for PassthroughLl {
    fn path(&self) -> &Path {
        self.mount.path()
    }

    fn description(&self) -> String {
        format!(
            "libfuse {} passthrough_ll ({}; -f -o source=SRC,{OPTIONS}: up to 10 threads, \
             cache=auto) {}, SRC = {}",
            self.build.libfuse,
            self.build.command,
            self.mount.location(),
            self.source.description()
        )
    }

    fn close(self: Box<Self>) -> Result<()> {
        let PassthroughLl {
            mount,
            source,
            build,
        } = *self;
        let stopped = mount.close();
        let removed = source.close();
        drop(build);
        stopped.and(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::KernelTarget;
    use crate::target::Target;
    use crate::workloads::HostTree;
    use std::sync::Arc;

    /// A build, or `None` (with the reason printed) where this machine
    /// cannot build or mount it (no libfuse3-dev, no /dev/fuse).
    fn build_or_skip() -> Option<Build> {
        if !Path::new("/dev/fuse").exists() {
            eprintln!("skipping: no /dev/fuse");
            return None;
        }
        match Build::new() {
            Ok(b) => Some(b),
            Err(why) => {
                eprintln!("skipping: {why}");
                None
            }
        }
    }

    /// Every workload runs in a passthrough_ll mount with 1 and 2 threads;
    /// closing stops the server and removes the mount point and the source.
    #[test]
    fn runs_every_workload_and_cleans_up() {
        let Some(build) = build_or_skip() else {
            return;
        };
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir(src.path().join("sub")).unwrap();
        std::fs::write(src.path().join("sub/a.h"), vec![7u8; 100_000]).unwrap();
        std::fs::write(src.path().join("b.h"), b"int b;").unwrap();
        std::os::unix::fs::symlink("b.h", src.path().join("c.h")).unwrap();
        let tree = Arc::new(HostTree::read(src.path()).unwrap());

        let dir = PassthroughLl::start(build, None).unwrap();
        let mountpoint = dir.mount.path().to_path_buf();
        let source = dir.source.path().to_path_buf();
        let binary = dir.build.binary();
        assert!(dir.description().contains("passthrough_ll"));
        let mut target: Box<dyn Target> =
            Box::new(KernelTarget::on("passthrough-ll", Box::new(dir)).unwrap());
        crate::harness::run_every_workload(target.as_mut(), tree);
        // The runs went through the mount into the source directory.
        let left: Vec<_> = std::fs::read_dir(&source)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["tree1"]);
        target.close().unwrap();
        for gone in [&mountpoint, &source, &binary] {
            assert!(!gone.exists(), "{gone:?} left behind");
        }
    }

    /// Dropped without `close` (an error path): the server is stopped and
    /// reaped, the mount point removed.
    #[test]
    fn drop_stops_the_server() {
        let Some(build) = build_or_skip() else {
            return;
        };
        let dir = PassthroughLl::start(build, None).unwrap();
        let mountpoint = dir.mount.path().to_path_buf();
        let pid = rustix::process::Pid::from_raw(dir.mount.pid() as i32).unwrap();
        assert!(crate::fuse_mount::mounted(&mountpoint)
            .unwrap()
            .is_some_and(|m| m.is_fuse(SUBTYPE)));
        drop(dir);
        assert!(!mountpoint.exists(), "{mountpoint:?} left behind");
        assert_eq!(
            rustix::process::test_kill_process(pid),
            Err(rustix::io::Errno::SRCH)
        );
    }

    /// Missing examples give a reason to skip, naming the file.
    #[test]
    fn missing_source_is_a_skip_reason() {
        let dir = tempfile::tempdir().unwrap();
        let why = Build::from(dir.path()).unwrap_err();
        assert!(why.contains("passthrough_ll.c not found"), "{why}");
    }
}
