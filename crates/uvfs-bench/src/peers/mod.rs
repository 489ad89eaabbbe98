//! Peer targets: other crates' in-memory file systems, run on the workloads
//! they have the operations for (feature `peers`; Linux analogue: none, they
//! stand beside uvfs as the kernel peer does).
//!
//! | target | crate | what it is |
//! |---|---|---|
//! | `vfs-memoryfs` ([`vfs_memory`]) | `vfs` 0.13 | `MemoryFS`: one `RwLock<HashMap<path, file>>` |
//! | `wasmer-memfs` ([`wasmer`]) | `virtual-fs` 0.704 | wasmer's `mem_fs::FileSystem`: one `RwLock` over an inode slab |
//!
//! The peers have no descriptors, processes or cwd, so a worker is a thread that
//! calls the file system directly with absolute paths (built once, or joined into a
//! reused buffer, not allocated per call), and "close" is dropping the handle. The
//! workers are the shared loops ([`crate::loops`]) over each peer's
//! [`Calls`](crate::calls::Calls) (`VfsCalls`, `WasmerCalls`); a call the crate does not
//! have answers [`Unsupported`](crate::calls::Unsupported). Each target's `supports` and
//! `description` say which workloads run and what one operation is there;
//! the module docs say why. Both peers keep one lock over their whole tree,
//! so none of their workloads is expected to scale with threads.
//!
//! Invariants (both): every run lives in `/bench/runN`, removed by teardown
//! after checking that it holds nothing but the files setup made; imported
//! trees live in `/treeN`, one per [`HostTree`](crate::workloads::HostTree)
//! (like uvfs's), until the target is dropped.

pub mod vfs_memory;
pub mod wasmer;

use crate::error::{Error, Result};
use crate::target::Target;
use crate::workloads::WorkloadKind;

/// The peer targets, in a fixed order: `vfs-memoryfs`, `wasmer-memfs`.
///
/// # Errors
///
/// Creating a target's `/bench` directory failed.
pub fn targets() -> Result<Vec<Box<dyn Target>>> {
    Ok(vec![
        Box::new(vfs_memory::VfsMemoryTarget::new()?),
        Box::new(wasmer::WasmerTarget::new()?),
    ])
}

/// The error `setup` returns for a workload the target does not support
/// (the harness asks [`Target::supports`] first, so only a direct caller
/// sees it).
#[cold]
fn unsupported(target: &str, kind: WorkloadKind) -> Error {
    Error::msg(format!("{target}: workload {kind} is not supported"))
}

/// A peer's call error ([`Calls::Error`](crate::calls::Calls::Error)): its crate's own
/// error `E`, an I/O error of a handle's `Read`/`Seek`, or a call it does not have.
#[derive(Debug)]
pub enum PeerError<E> {
    /// The crate's error.
    Fs(E),
    /// A handle's I/O error.
    Io(std::io::Error),
    /// A call the crate does not have.
    Unsupported(crate::calls::Unsupported),
}

impl<E: std::fmt::Display> std::fmt::Display for PeerError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeerError::Fs(e) => e.fmt(f),
            PeerError::Io(e) => e.fmt(f),
            PeerError::Unsupported(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for PeerError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PeerError::Fs(e) => Some(e),
            PeerError::Io(e) => Some(e),
            PeerError::Unsupported(e) => Some(e),
        }
    }
}

/// Names of the files a teardown found in a run's directory beyond the ones
/// setup made, for its error: at most 5, then a count.
fn leftovers(names: &[String]) -> String {
    let mut shown: Vec<&str> = names.iter().take(5).map(String::as_str).collect();
    let more = names.len().saturating_sub(shown.len());
    let more = (more > 0).then(|| format!("and {more} more"));
    shown.extend(more.as_deref());
    shown.join(", ")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::harness::run_one;
    use crate::workloads::{HostTree, Workload};
    use std::sync::Arc;
    use std::time::Duration;

    /// Runs every workload `target` supports with 1 and 2 threads for
    /// 20 ms each through the harness (setup, measure, teardown and its
    /// checks), on a small tree with a subdirectory, a 100 kB file (two
    /// reads), an empty file and a symlink.
    pub(crate) fn run_every_supported_workload(target: &mut dyn Target) {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir(src.path().join("sub")).unwrap();
        std::fs::write(src.path().join("sub/a.h"), vec![7u8; 100_000]).unwrap();
        std::fs::write(src.path().join("b.h"), b"int b;").unwrap();
        std::fs::write(src.path().join("empty.h"), b"").unwrap();
        std::os::unix::fs::symlink("sub/a.h", src.path().join("l.h")).unwrap();
        let tree = Arc::new(HostTree::read(src.path()).unwrap());
        let mut ran = 0;
        for workload in [
            Workload::Syscall,
            Workload::CreatClo,
            Workload::Futimes,
            Workload::Tree(tree),
            Workload::FstatShared,
            Workload::ReadShared,
            Workload::OpenClose,
        ] {
            if !target.supports(workload.kind()) {
                continue;
            }
            ran += 1;
            for threads in [1, 2] {
                let rate = run_one(target, &workload, threads, Duration::from_millis(20))
                    .unwrap_or_else(|e| panic!("{} {workload:?} {threads}t: {e}", target.name()));
                assert!(rate > 0.0, "{} {workload:?} {threads}t", target.name());
            }
        }
        assert!(ran >= 4, "{} ran {ran} workloads", target.name());
    }

    #[test]
    fn leftovers_are_listed_briefly() {
        let names: Vec<String> = (0..7).map(|i| format!("t0-{i}")).collect();
        assert_eq!(leftovers(&names[..1]), "t0-0");
        assert_eq!(
            leftovers(&names),
            "t0-0, t0-1, t0-2, t0-3, t0-4, and 2 more"
        );
    }
}
