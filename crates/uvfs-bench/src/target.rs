//! What a benchmark runs on: a [`Target`] (uvfs, the Linux kernel, later other
//! crates or ablation variants) prepares one [`Worker`] per thread for a run.
//!
//! A run's life: [`Target::setup`] on the main thread (fork the tasks, open the
//! shared files), then each worker moves to its own thread, calls
//! [`Worker::enter`], waits on the start barrier, calls [`Worker::run`] in
//! batches until the stop flag, calls [`Worker::exit`] and is dropped on that
//! thread; then [`Target::teardown`] on the main thread removes what the run
//! left and checks it.

use std::time::Duration;

use crate::error::Result;
use crate::workloads::{Workload, WorkloadKind};

/// One system under test: something that implements the workloads' calls.
///
/// Only the main thread uses a `Target`, so it need not be `Send` or `Sync`;
/// the workers it hands out are `Send`.
pub trait Target {
    /// Short name used in tables and JSON, e.g. `"uvfs"` or `"kernel"`.
    fn name(&self) -> &str;

    /// One line saying what is measured, e.g. where the kernel's directory
    /// lives and which file system it is.
    fn description(&self) -> String;

    /// Whether this target implements `kind`. A peer that lacks one of the
    /// workload's operations (say, another crate without `pread`) returns
    /// false: the harness then skips it for that workload, running and
    /// reporting nothing for it (no series, no ratio). uvfs and the kernel
    /// support every workload.
    fn supports(&self, kind: WorkloadKind) -> bool {
        let _ = kind;
        true
    }

    /// Prepares one run of `workload` with `threads` workers: the shared
    /// state (parent task, shared open file, shared directory) and one worker
    /// per thread. The workers may borrow from the target; they are all
    /// dropped before [`Target::teardown`].
    ///
    /// # Errors
    ///
    /// Any failed call while preparing, with context.
    fn setup(&mut self, workload: &Workload, threads: usize) -> Result<Vec<Box<dyn Worker + '_>>>;

    /// Ends the run started by the last [`Target::setup`] (also after a failed
    /// or partial setup): closes the shared files, removes the run's
    /// directory and checks it was left as expected (e.g. creat-clo unlinked
    /// every file it created).
    ///
    /// # Errors
    ///
    /// Any failed call or unexpected leftover, with context.
    fn teardown(&mut self) -> Result<()>;

    /// Measures one run of `workload` with `threads` workers for `duration` by itself and
    /// returns its rate in ops/s, for a target whose workers live in another process (`run`,
    /// `proot`: see [`crate::worker_process`]), which sets up, measures and tears down
    /// there with this crate's own harness; `None` (every in-process target): the harness
    /// calls [`Target::setup`], measures the workers here and calls [`Target::teardown`].
    ///
    /// # Errors
    ///
    /// As for a run here: setup, a worker or teardown failed, now in the other process.
    fn measure_elsewhere(
        &mut self,
        workload: &Workload,
        threads: usize,
        duration: Duration,
    ) -> Option<Result<f64>> {
        let _ = (workload, threads, duration);
        None
    }

    /// Releases the target at the end of the benchmark (e.g. unmounts the
    /// kernel peer's tmpfs), reporting failures. Dropping a target without
    /// calling this releases it too, silently.
    ///
    /// # Errors
    ///
    /// Releasing failed, with context.
    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

/// One thread's share of a run. Created by [`Target::setup`] on the main
/// thread, then used and dropped on its own thread.
///
/// Implementations that write their own fields while running (counters,
/// name buffers, positions) are `#[repr(align(128))]`: the main thread
/// allocates all workers one after another, and two workers' fields on one
/// cache line would make the harness, not the target, stop scaling.
pub trait Worker: Send {
    /// Called on the worker's thread before the start barrier (e.g. the
    /// kernel peer's `unshare(CLONE_FILES | CLONE_FS)`). Not timed.
    ///
    /// # Errors
    ///
    /// Any failed call, with context.
    fn enter(&mut self) -> Result<()> {
        Ok(())
    }

    /// Performs exactly `n` operations of the workload (one operation = one
    /// unit of the workload's rate, see
    /// [`WorkloadKind::unit`](crate::workloads::WorkloadKind::unit)), checking every
    /// call's result.
    ///
    /// # Errors
    ///
    /// The first failed call, with context; the operations done in this
    /// batch are then not counted.
    fn run(&mut self, n: u32) -> Result<()>;

    /// Called on the worker's thread after the stop flag, before the worker
    /// is dropped there: releases what the thread holds. Not timed.
    ///
    /// # Errors
    ///
    /// Any failed call, with context.
    fn exit(&mut self) -> Result<()> {
        Ok(())
    }
}
