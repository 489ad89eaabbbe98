//! The `seccomp-floor` target: what a notified call costs on this machine when the
//! supervisor does nothing but answer ([`uvfs_run::notify_floor`]), measured interleaved
//! with `run` so the time per notified call of `uvfs run` has its floor beside it.
//!
//! One operation is one notified `fstat(0)`, answered with a `process_vm_writev` of a
//! `struct stat` and a success, as `uvfs run` answers an `fstat` (one notified call per
//! `fstat-shared` operation there too); its N threads are N processes, pinned as the
//! workers are, under one filter and listener, served by one thread (as `uvfs run` serves
//! with one on 2 CPUs). Only `fstat-shared` runs.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::target::{Target, Worker};
use crate::workloads::{Workload, WorkloadKind};

/// See the module doc.
#[derive(Debug)]
pub struct SeccompFloor;

impl SeccompFloor {
    /// The target, after a 1 ms probe shows the kernel lets this process measure it.
    ///
    /// # Errors
    /// Why not, in words: the probe's error (no synchronous wake-ups before Linux 6.6; a
    /// filter refused, e.g. `EBUSY` inside `uvfs run`; not x86_64).
    pub fn new() -> std::result::Result<SeccompFloor, String> {
        #[cfg(target_arch = "x86_64")]
        return uvfs_run::notify_floor(1, Duration::from_millis(1))
            .map(|_| SeccompFloor)
            .map_err(|e| format!("the probe failed: {e}"));
        #[cfg(not(target_arch = "x86_64"))]
        Err("x86_64 only".to_owned())
    }
}

impl Target for SeccompFloor {
    fn name(&self) -> &str {
        "seccomp-floor"
    }

    fn description(&self) -> String {
        "fstat-shared only: processes calling fstat(0) under a seccomp filter that notifies \
         only fstat, answered by one thread that only writes the stat buffer: the floor \
         under `uvfs run`'s time per notified call"
            .to_owned()
    }

    fn supports(&self, kind: WorkloadKind) -> bool {
        kind == WorkloadKind::FstatShared
    }

    fn setup(&mut self, _: &Workload, _: usize) -> Result<Vec<Box<dyn Worker + '_>>> {
        Err(Error::msg(
            "seccomp-floor: runs are measured by its own processes (measure_elsewhere)",
        ))
    }

    fn teardown(&mut self) -> Result<()> {
        Ok(())
    }

    fn measure_elsewhere(
        &mut self,
        _: &Workload,
        threads: usize,
        duration: Duration,
    ) -> Option<Result<f64>> {
        #[cfg(target_arch = "x86_64")]
        let r = uvfs_run::notify_floor(threads, duration)
            .map_err(|e| Error::new("seccomp-floor: the probe", e));
        #[cfg(not(target_arch = "x86_64"))]
        let r = {
            let _ = (threads, duration);
            Err(Error::msg("seccomp-floor: x86_64 only"))
        };
        Some(r)
    }
}
