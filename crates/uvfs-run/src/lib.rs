//! `uvfs run -- CMD`: an unmodified program on the embedded file layer, without root or
//! FUSE.
//!
//! The program runs under a seccomp filter whose file-system calls become user
//! notifications (`SECCOMP_RET_USER_NOTIF`); this process, the supervisor, answers each one
//! from a uvfs [`Task`](uvfs::Task) of the program's process: paths are resolved in uvfs's
//! namespace (a tmpfs at `/`, host directories bound read-only at the same paths by
//! default), data moves with `process_vm_readv`/`process_vm_writev`. Descriptor numbers are
//! the kernel's: a uvfs file opened by the program gets a kernel descriptor at the same
//! number (`SECCOMP_IOCTL_NOTIF_ADDFD`): the host file itself for a file on a host bind (so
//! the loader maps libraries natively), an empty memfd placeholder for a file only uvfs
//! holds. Calls on descriptors uvfs does not know (pipes, sockets, the terminal) run
//! natively (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`), as do the calls the filter lets through.
//! Each call is checked with the calling thread's credentials as the kernel has them
//! (file-system ids, groups, capabilities), read again after the thread changes them.
//!
//! Linux analogue: none in the kernel; the mechanism is seccomp_unotify(2) as gVisor's
//! systrap platform and LXD's syscall interception use it. What is supported, and what
//! returns `ENOSYS` with one log line, is listed in docs/run.md.
//!
//! x86_64 only.

#![warn(missing_docs, missing_debug_implementations)]

#[cfg(target_arch = "x86_64")]
mod creds;
#[cfg(target_arch = "x86_64")]
mod floor;
#[cfg(target_arch = "x86_64")]
mod supervisor;
#[cfg(target_arch = "x86_64")]
mod sys;
#[cfg(target_arch = "x86_64")]
mod view;

use std::ffi::OsString;
use std::path::PathBuf;

#[cfg(target_arch = "x86_64")]
pub use floor::notify_floor;
#[cfg(target_arch = "x86_64")]
pub use view::{duplicate_mount_point, parse_tmpfs, Bind};

/// What `uvfs run` runs, and the file system it sees.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The program and its arguments (`argv[0]` looked up in `PATH` inside the view).
    pub argv: Vec<OsString>,
    /// Host directories bound into the view (`--bind HOST:PATH[:ro|rw]`, PATH not `/`),
    /// after the default binds (which a bind of the same PATH replaces).
    #[cfg(target_arch = "x86_64")]
    pub binds: Vec<Bind>,
    /// Fresh tmpfs mounts at these absolute paths other than `/` (`--tmpfs PATH`).
    pub tmpfs: Vec<String>,
    /// Leave out the default read-only binds of /usr, /bin, /sbin, /lib*, /etc, /dev,
    /// /proc, /sys and /run (`--no-default-binds`).
    pub no_default_binds: bool,
    /// Host trees copied into the tmpfs before the program starts (`--import
    /// HOST_DIR:PATH`).
    pub imports: Vec<(PathBuf, String)>,
    /// Trees copied out to the host after the program exits (`--export PATH:HOST_DIR`).
    pub exports: Vec<(String, PathBuf)>,
}

/// Runs the program on uvfs and returns its exit status (128 + the signal when a signal
/// ended it, as a shell reports it; 127 with one line on stderr when the program is not
/// found in the view's `PATH`, 126 when it cannot be executed).
///
/// # Errors
/// A one-line message when the view cannot be built (a missing host directory, a bad
/// PATH) or the kernel refuses the filter.
pub fn run(opts: &RunOptions) -> Result<i32, String> {
    #[cfg(target_arch = "x86_64")]
    {
        let ns = view::build(opts)?;
        let code = supervisor::run(&ns, &opts.argv)?;
        view::export(&ns, &opts.exports)?;
        Ok(code)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = opts;
        Err("uvfs run: only x86_64 is supported".to_owned())
    }
}
