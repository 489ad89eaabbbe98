//! uvfs's FUSE client (`uvfs::fuse::client`) as a target: a [`UvfsTarget`] whose `/bench`
//! is a client mount, so every workload (and `tree`'s import) goes through the client's
//! requests, replies and request lifecycle.
//!
//! - [`in_process`]: the server is uvfs's own (`uvfs::fuse::UvfsFuse` over a tmpfs, fuser's
//!   `Session` on one end of a `SOCK_SEQPACKET` socket pair, one server thread per worker
//!   thread of the largest run), in this process: no kernel, no /dev/fuse, no child; it
//!   answers each request as soon as uvfs has done it. Lesson 5 of `--ablation` compares
//!   `uvfs-fuse-client[locked-end]` (Linux's `request_end` before 2018: the input queue's
//!   lock for every reply) with `uvfs-fuse-client` (the sticky-flag fast path) on it.
//! - [`passthrough_ll`]: `fuse-client`, libfuse's `passthrough_ll` example, unmodified, as a
//!   child over `/dev/fd/N`, serving a private tmpfs; beside `passthrough-ll` (the kernel's
//!   FUSE client on the same build) it compares the two clients on one server.
//!
//! Linux analogue: fs/fuse (the kernel's client) against the same servers.

use std::path::Path;
use std::sync::Arc;

use uvfs::fuse::client::{self, FuseClientOptions, FuseServer, RequestEnd};
use uvfs::fuse::{FuseOptions, UvfsFuse};

use crate::error::{Context as _, Error, Result};
use crate::kernel::HostDir;
use crate::passthrough_ll::Build;
use crate::target::Target;
use crate::uvfs_target::{Cleanup, UvfsTarget};

/// The in-process target's name for `end`: `uvfs-fuse-client` or
/// `uvfs-fuse-client[locked-end]`.
pub fn in_process_name(end: RequestEnd) -> &'static str {
    match end {
        RequestEnd::Sticky => "uvfs-fuse-client",
        RequestEnd::Locked => "uvfs-fuse-client[locked-end]",
    }
}

/// uvfs's FUSE client on an in-process uvfs server with `threads` server threads, the
/// client ending requests as `end` (see the module doc).
///
/// # Errors
///
/// The socket pair, the server thread, the INIT handshake or the mount failed.
pub fn in_process(end: RequestEnd, threads: usize) -> Result<Box<dyn Target>> {
    let threads = threads.max(1);
    let (mine, theirs) = rustix::net::socketpair(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| Error::msg(format!("socketpair: {e}")))?;
    let server_mnt = uvfs::tmpfs::mount(uvfs::tmpfs::TmpfsOptions::unlimited());
    let fs = UvfsFuse::new(
        &server_mnt,
        FuseOptions {
            threads,
            ..Default::default()
        },
    );
    // Kept to end the server's loop at close: the client's connection may outlive the
    // mount for a while (its last inodes go with the dentries the epoch frees later).
    let stop = theirs
        .try_clone()
        .map_err(|e| Error::msg(format!("dup of the server's socket: {e}")))?;
    let mut config = fuser::Config::default();
    config.n_threads = Some(threads);
    // `from_fd` runs INIT (it reads the client's), so it runs on the server thread while
    // `client::mount` below sends INIT and waits for the answer.
    let server = std::thread::Builder::new()
        .name("uvfs-bench-fuse-server".into())
        .spawn(move || fuser::Session::from_fd(fs, theirs, fuser::SessionACL::Owner, config)?.run())
        .map_err(|e| Error::msg(format!("starting the in-process server: {e}")))?;
    let name = in_process_name(end);
    let opts = FuseClientOptions {
        request_end: end,
        ..Default::default()
    };
    let m = client::mount(FuseServer::Socket(mine), opts)
        .with_context(|| format!("{name}: mounting the in-process server"))?;
    let how = match end {
        RequestEnd::Sticky => "request_end locks only for interrupted requests (sticky flag)",
        RequestEnd::Locked => "request_end takes the input queue's lock for every reply (pre-2018)",
    };
    let desc = format!(
        "uvfs's FUSE client at /bench of an embedded tmpfs, on uvfs's FUSE server (tmpfs, \
         fuser, {threads} thread(s)) in this process over a SOCK_SEQPACKET socket pair; {how}; \
         tasks as for uvfs"
    );
    // The server's loop ends at DESTROY or end of file: shutting its socket down makes
    // every server thread's read return end of file now; a panic there is reported.
    let cleanup = Cleanup(Box::new(move || {
        let _ = rustix::net::shutdown(&stop, rustix::net::Shutdown::Both);
        server
            .join()
            .map(drop)
            .map_err(|_| Error::msg("the in-process FUSE server panicked"))
    }));
    Ok(Box::new(UvfsTarget::<uvfs::variant::Uvfs>::fuse_client(
        name,
        m,
        desc,
        Some(cleanup),
    )?))
}

/// `fuse-client`: uvfs's FUSE client on `build`'s `passthrough_ll` serving a fresh
/// [`HostDir`] (made with `host_dir` as the kernel target's: a private tmpfs by default),
/// run as `passthrough_ll -f -o source=SRC /dev/fd/N` (libfuse's worker pool, cache=auto;
/// no `clone_fd`: it clones a `/dev/fuse` descriptor, which a socket is not).
///
/// # Errors
///
/// The source directory cannot be made, the server does not start or answer INIT, or the
/// mount failed.
pub fn passthrough_ll(build: Build, host_dir: Option<&Path>) -> Result<Box<dyn Target>> {
    let source = HostDir::create(host_dir)?;
    let argv = vec![
        build.binary().display().to_string(),
        "-f".to_owned(),
        "-o".to_owned(),
        format!("source={}", source.path().display()),
        "{}".to_owned(),
    ];
    let m = match client::mount(FuseServer::Spawn(argv), FuseClientOptions::default()) {
        Ok(m) => m,
        Err(e) => {
            let _ = source.close();
            return Err(Error::msg(format!(
                "fuse-client: mounting passthrough_ll: {e}"
            )));
        }
    };
    let desc = format!(
        "uvfs's FUSE client at /bench of an embedded tmpfs, on libfuse {} passthrough_ll ({}; \
         -f -o source=SRC /dev/fd/N: up to 10 threads, cache=auto) over a SOCK_SEQPACKET \
         socket pair, SRC = {}; tasks as for uvfs",
        build.libfuse(),
        build.command(),
        source.description()
    );
    // After the mount went (the server was waited for): the source, then the binary.
    let cleanup = Cleanup(Box::new(move || {
        let removed = source.close();
        drop(build);
        removed
    }));
    let m: Arc<uvfs::Mount> = m;
    Ok(Box::new(UvfsTarget::<uvfs::variant::Uvfs>::fuse_client(
        "fuse-client",
        m,
        desc,
        Some(cleanup),
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::run_every_workload;
    use crate::workloads::HostTree;

    /// Every workload through the client, 1 and 2 threads (`run_every_workload`; each
    /// teardown unlinks what its run made, through the client, and fails on leftovers);
    /// then the target closes and its server ends.
    fn runs_every_workload(mut target: Box<dyn Target>) {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir(src.path().join("sub")).unwrap();
        std::fs::write(src.path().join("sub/a.h"), vec![7u8; 300_000]).unwrap();
        std::fs::write(src.path().join("b.h"), b"int b;").unwrap();
        let tree = Arc::new(HostTree::read(src.path()).unwrap());
        run_every_workload(&mut *target, tree);
        target.close().unwrap();
    }

    #[test]
    fn in_process_runs_every_workload_either_way() {
        for end in [RequestEnd::Sticky, RequestEnd::Locked] {
            let t = in_process(end, 2).unwrap();
            assert_eq!(t.name(), in_process_name(end));
            runs_every_workload(t);
        }
    }

    #[test]
    fn passthrough_ll_runs_every_workload() {
        let build = match Build::new() {
            Ok(b) => b,
            Err(why) => {
                assert!(std::env::var_os("UVFS_REQUIRE_FUSE").is_none(), "{why}");
                eprintln!("skipping: {why}");
                return;
            }
        };
        runs_every_workload(passthrough_ll(build, None).unwrap());
    }
}
