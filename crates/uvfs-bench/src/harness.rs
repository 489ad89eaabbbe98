//! Runs workloads on targets and measures them: threads start together,
//! run for a fixed time, stop on a shared flag, and count their operations
//! in thread-local counters summed at the end.
//!
//! A run's rate is its total operations over one window common to all
//! threads: from the moment the start gate opens to the moment the last
//! thread, having finished the batch it was in, sees the stop flag. Every
//! counted operation falls inside it, and a thread scheduled late (more
//! threads than cores) adds only the operations it did, not a rate over a
//! shorter window of its own. Targets are interleaved per repetition (uvfs rep 1, kernel
//! rep 1, kernel rep 2, uvfs rep 2, ...: each repetition starts one target later) after
//! one discarded warm-up run each, so slow drifts of a noisy machine hit every target alike.
//!
//! SIGINT and SIGTERM (see [`crate::interrupt`]) raise the stop flag too, and
//! fail the run, so that its teardown and the targets' cleanup still run.

use std::io::IsTerminal as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::interrupt;
use crate::target::{Target, Worker};
use crate::workloads::{Workload, WorkloadKind};

/// What to run and for how long.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Thread counts, each run separately, in this order.
    pub threads: Vec<usize>,
    /// Measured repetitions per (target, workload, threads).
    pub reps: u32,
    /// Length of one measured run.
    pub duration: Duration,
    /// Length of the discarded warm-up run before the repetitions.
    pub warmup: Duration,
}

impl Plan {
    /// The warm-up length for runs of `duration`: a quarter of it, between
    /// 50 ms and 500 ms (never longer than the run itself).
    pub fn warmup_for(duration: Duration) -> Duration {
        (duration / 4)
            .clamp(Duration::from_millis(50), Duration::from_millis(500))
            .min(duration)
    }

    /// How long this plan takes in total for `pairs` (workload, target)
    /// pairs, warm-ups included (setup not counted). Count only the pairs
    /// that run, see [`supported_pairs`]: [`run_all`] skips a target for a
    /// workload it does not support.
    pub fn expected(&self, pairs: usize) -> Duration {
        let per = u32::try_from(pairs * self.threads.len()).unwrap_or(u32::MAX);
        self.duration
            .saturating_mul(self.reps)
            .saturating_add(self.warmup)
            .saturating_mul(per)
    }
}

/// Median of `v` (the mean of the middle two for an even count); 0 when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The measured rates of one (target, workload, thread count).
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    /// The target's name.
    pub target: String,
    /// The workload.
    pub workload: WorkloadKind,
    /// Its unit, see [`WorkloadKind::unit`].
    pub unit: &'static str,
    /// Worker threads.
    pub threads: usize,
    /// The discarded warm-up run's rate, in ops/s.
    pub warmup: f64,
    /// Each measured repetition's rate, in ops/s, in run order.
    pub reps: Vec<f64>,
}

impl Series {
    /// Median of the repetitions (mean of the middle two for an even count),
    /// in ops/s; 0 if there are none.
    pub fn median(&self) -> f64 {
        median(&self.reps)
    }

    /// Slowest repetition, in ops/s.
    pub fn min(&self) -> f64 {
        self.reps.iter().copied().fold(f64::INFINITY, f64::min)
    }

    /// Fastest repetition, in ops/s.
    pub fn max(&self) -> f64 {
        self.reps.iter().copied().fold(0.0, f64::max)
    }
}

/// The (workload, target) pairs [`run_all`] runs: those where
/// [`Target::supports`] the workload.
pub fn supported_pairs(targets: &[Box<dyn Target>], workloads: &[Workload]) -> usize {
    workloads
        .iter()
        .map(|w| targets.iter().filter(|t| t.supports(w.kind())).count())
        .sum()
}

/// Runs every workload × thread count × (warm-up + repetitions) × target,
/// targets interleaved within each repetition, and returns one [`Series`]
/// per (workload, thread count, target) in that order. A target that does
/// not [support](Target::supports) a workload is skipped for it: no run, no
/// series, no progress.
///
/// # Errors
///
/// The first failed setup, operation or teardown, with the run it happened
/// in; nothing after it runs.
pub fn run_all(
    targets: &mut [Box<dyn Target>],
    workloads: &[Workload],
    plan: &Plan,
    progress: &ProgressBar,
) -> Result<Vec<Series>> {
    let mut out = Vec::new();
    for workload in workloads {
        let kind = workload.kind();
        // The targets that run this workload, by index.
        let running: Vec<usize> = (0..targets.len())
            .filter(|&t| targets[t].supports(kind))
            .collect();
        for &threads in &plan.threads {
            let first = out.len();
            for &t in &running {
                let target = &targets[t];
                out.push(Series {
                    target: target.name().to_owned(),
                    workload: kind,
                    unit: kind.unit(),
                    threads,
                    warmup: 0.0,
                    reps: Vec::with_capacity(plan.reps as usize),
                });
            }
            for rep in 0..=plan.reps {
                let duration = if rep == 0 { plan.warmup } else { plan.duration };
                // Repetition r starts with the r-th target (A B C, B C A, C A B, ...): every
                // target runs in every position equally often, so a drift within a repetition
                // (a neighbour's load, the clock) does not always favour the same one.
                let n = running.len();
                for k in 0..n {
                    let i = (k + rep as usize) % n;
                    let t = running[i];
                    let target = &mut targets[t];
                    let what = if rep == 0 {
                        format!("{} {kind} {threads}t warm-up", target.name())
                    } else {
                        format!(
                            "{} {kind} {threads}t rep {rep}/{}",
                            target.name(),
                            plan.reps
                        )
                    };
                    progress.set_message(what.clone());
                    let rate = run_one(target.as_mut(), workload, threads, duration)
                        .map_err(|e| Error::new(what, e))?;
                    let series = &mut out[first + i];
                    if rep == 0 {
                        series.warmup = rate;
                    } else {
                        series.reps.push(rate);
                    }
                    progress.inc(duration.as_millis() as u64);
                }
            }
            // A bar that would show (a long run) but cannot, because stderr is a pipe or a
            // CI log: one line per finished workload and thread count instead of silence.
            if progress.length().is_some() && !std::io::stderr().is_terminal() {
                eprintln!("{}", done_line(&out[first..]));
            }
        }
    }
    progress.finish_and_clear();
    Ok(out)
}

/// The line [`run_all`] prints when a (workload, thread count) is done and stderr is not a
/// terminal: `"uvfs bench: open-close 2t: uvfs 4.40M, kernel 338.0k opens/s"` (each target's
/// median rate, in the workload's unit).
fn done_line(group: &[Series]) -> String {
    let Some(first) = group.first() else {
        return String::from("uvfs bench: (nothing ran)");
    };
    let rates: Vec<String> = group
        .iter()
        .map(|s| format!("{} {}", s.target, short_rate(s.median())))
        .collect();
    format!(
        "uvfs bench: {} {}t: {} {}",
        first.workload,
        first.threads,
        rates.join(", "),
        first.unit
    )
}

/// `1234567.0` -> `"1.23M"`, `33800.0` -> `"33.8k"`, `12.5` -> `"12.5"`.
fn short_rate(x: f64) -> String {
    if x >= 1e9 {
        format!("{:.2}G", x / 1e9)
    } else if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1}k", x / 1e3)
    } else {
        format!("{x:.1}")
    }
}

/// Tests: runs every workload (the tree's for `tree`) on `target` at 1 and 2 threads for
/// 20 ms each and asserts each measured a rate.
#[cfg(test)]
pub(crate) fn run_every_workload(
    target: &mut dyn crate::target::Target,
    tree: std::sync::Arc<crate::workloads::HostTree>,
) {
    use crate::workloads::Workload;
    for workload in [
        Workload::Syscall,
        Workload::CreatClo,
        Workload::Futimes,
        Workload::Tree(tree),
        Workload::FstatShared,
        Workload::ReadShared,
        Workload::OpenClose,
        Workload::StatPath,
    ] {
        for threads in [1, 2] {
            let rate = run_one(target, &workload, threads, Duration::from_millis(20)).unwrap();
            assert!(rate > 0.0, "{workload:?} {threads}");
        }
    }
}

/// Sets up, measures and tears down one run; returns its rate in ops/s.
/// Teardown runs even when setup or the run failed; the first error wins.
///
/// # Errors
///
/// Setup, a worker, or teardown failed.
pub fn run_one(
    target: &mut dyn Target,
    workload: &Workload,
    threads: usize,
    duration: Duration,
) -> Result<f64> {
    if let Some(rate) = target.measure_elsewhere(workload, threads, duration) {
        return rate;
    }
    let measured = target
        .setup(workload, threads)
        .and_then(|workers| measure(workers, workload.kind().batch(), duration));
    let torn_down = target.teardown();
    let rate = measured?.rate;
    torn_down?;
    Ok(rate)
}

/// The outcome of one measured run.
#[derive(Debug, Clone)]
pub struct Measurement {
    /// Operations per second: all threads' operations over `window`.
    pub rate: f64,
    /// From the start gate opening to the last thread seeing the stop flag
    /// (the longest of the per-thread times).
    pub window: Duration,
    /// Per thread: operations done, and the time from the start gate
    /// opening to this thread seeing the stop flag after its last batch.
    pub per_thread: Vec<(u64, Duration)>,
}

/// The start gate and stop flag the workers of one run share.
#[derive(Debug, Default)]
struct Gate {
    /// Workers that have entered (or failed to) and wait for `go`.
    ready: AtomicUsize,
    /// Set once by the main thread: start.
    go: AtomicBool,
    /// Set by the main thread when time is up or on a signal, or by a
    /// failing worker.
    stop: AtomicBool,
}

/// Runs `workers` on one thread each for `duration`: each calls
/// [`Worker::enter`], waits at the start gate, runs batches of `batch`
/// operations until the stop flag, then calls [`Worker::exit`]. The stop
/// flag is raised when `duration` is up, or early by a failing worker or a
/// signal.
///
/// # Errors
///
/// A thread could not be spawned, or a worker failed or panicked (the
/// others are stopped early); the first error by thread index is returned.
/// Else "interrupted by SIGINT" (or SIGTERM) if a signal stopped the run.
pub fn measure(
    workers: Vec<Box<dyn Worker + '_>>,
    batch: u32,
    duration: Duration,
) -> Result<Measurement> {
    let gate = Gate::default();
    let gate = &gate;
    let (start, results) = std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(workers.len());
        let mut spawn_error = None;
        let cpus = allowed_cpus();
        for (index, worker) in workers.into_iter().enumerate() {
            let cpu = (!cpus.is_empty()).then(|| cpus[index % cpus.len()]);
            let spawned = std::thread::Builder::new()
                .name(format!("bench-{index}"))
                .spawn_scoped(s, move || {
                    pin_to(cpu);
                    worker_main(worker, batch, gate)
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    spawn_error = Some(Error::new("spawning a worker thread", e));
                    break;
                }
            }
        }
        if spawn_error.is_some() {
            // Relaxed: the workers read `stop` after the Acquire load of
            // `go` below, which orders it.
            gate.stop.store(true, Ordering::Relaxed);
        }
        // Acquire: pairs with each worker's Release increment of `ready` in
        // `worker_main`, so everything they did in `enter` happened before
        // the clock starts.
        while gate.ready.load(Ordering::Acquire) < handles.len() {
            std::thread::yield_now();
        }
        // Before opening the gate: no worker's operation precedes it.
        let start = Instant::now();
        // Release: pairs with the workers' Acquire load of `go` in
        // `worker_main`; publishes `stop` set above on a spawn failure.
        gate.go.store(true, Ordering::Release);
        loop {
            let left = duration.saturating_sub(start.elapsed());
            // Relaxed: only a hint to stop waiting early when a worker
            // failed; the join below orders everything else.
            if left.is_zero()
                || gate.stop.load(Ordering::Relaxed)
                || interrupt::received().is_some()
            {
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(10)));
        }
        // Relaxed: a flag polled between batches; nothing is published
        // with it (results come back through `join`).
        gate.stop.store(true, Ordering::Relaxed);
        let mut results: Vec<Result<(u64, Instant)>> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|p| Err(Error::msg(panic_message("worker thread", &*p))))
            })
            .collect();
        if let Some(e) = spawn_error {
            results.insert(0, Err(e));
        }
        (start, results)
    });
    let mut per_thread = Vec::with_capacity(results.len());
    for r in results {
        let (ops, stopped) = r?;
        per_thread.push((ops, stopped.saturating_duration_since(start)));
    }
    interrupt::check()?;
    let window = per_thread.iter().map(|&(_, t)| t).max().unwrap_or_default();
    let ops: u64 = per_thread.iter().map(|&(ops, _)| ops).sum();
    let rate = if window.is_zero() {
        0.0
    } else {
        ops as f64 / window.as_secs_f64()
    };
    Ok(Measurement {
        rate,
        window,
        per_thread,
    })
}

/// One worker thread: enter, wait at the gate, run batches until `stop`,
/// exit. Returns its operation count and when it saw the stop flag.
/// The CPUs this process may run on, in order (empty if unknown).
fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Pins the calling worker thread to `cpu` (worker i to the i-th allowed CPU, round robin).
/// Without it the scheduler often runs two busy workers of a 2-thread run in turns on one
/// CPU, and the run then measures no contention at all (the divan microbenchmarks showed
/// this). Best effort: where affinity cannot be set the worker runs unpinned.
fn pin_to(cpu: Option<usize>) {
    if let Some(cpu) = cpu {
        let mut set = rustix::thread::CpuSet::new();
        set.set(cpu);
        let _ = rustix::thread::sched_setaffinity(None, &set);
    }
}

fn worker_main(
    mut worker: Box<dyn Worker + '_>,
    batch: u32,
    gate: &Gate,
) -> Result<(u64, Instant)> {
    let entered = catch(|| worker.enter());
    if entered.is_err() {
        // Relaxed: a hint for the others and the main thread to give up;
        // the error itself comes back through `join`.
        gate.stop.store(true, Ordering::Relaxed);
    }
    // Release: pairs with the main thread's Acquire load of `ready` in
    // `measure`: our `enter` is done before the clock starts.
    gate.ready.fetch_add(1, Ordering::Release);
    // Acquire: pairs with the main thread's Release store of `go`.
    while !gate.go.load(Ordering::Acquire) {
        std::hint::spin_loop();
        std::thread::yield_now();
    }
    entered?;
    let ran = catch(|| {
        let mut ops = 0u64;
        loop {
            worker.run(batch)?;
            ops += u64::from(batch);
            // Relaxed: see the store in `measure`; read once per batch so
            // the flag's cache line is not pulled on every operation.
            if gate.stop.load(Ordering::Relaxed) {
                return Ok(ops);
            }
        }
    });
    let stopped = Instant::now();
    if ran.is_err() {
        // Relaxed: as for a failed `enter` above.
        gate.stop.store(true, Ordering::Relaxed);
    }
    let exited = catch(|| worker.exit());
    // Dropped here, on this thread: a kernel worker's own fds belong to this
    // thread's private fd table.
    drop(worker);
    let ops = ran?;
    exited?;
    Ok((ops, stopped))
}

/// Runs `f`, turning a panic into an [`Error`].
fn catch<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|p| Err(Error::msg(panic_message("worker", &*p))))
}

/// "`who` panicked: message" from a panic payload.
fn panic_message(who: &str, payload: &(dyn std::any::Any + Send)) -> String {
    let msg = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)");
    format!("{who} panicked: {msg}")
}

/// A progress bar on stderr for benchmarks expected to take longer than a
/// few seconds; hidden otherwise, and (by indicatif) when stderr is not a
/// terminal. Its length is `expected` in milliseconds; [`run_all`] advances
/// it by each run's duration, so the time left it shows is about right.
pub fn progress_bar(expected: Duration) -> ProgressBar {
    if expected < Duration::from_secs(4) {
        return ProgressBar::hidden();
    }
    let len = u64::try_from(expected.as_millis()).unwrap_or(u64::MAX);
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{elapsed_precise} [{wide_bar}] {percent:>3}% ~{eta} left  {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn done_line_names_each_target_median() {
        let s = |target: &str, reps: Vec<f64>| Series {
            target: target.to_owned(),
            workload: WorkloadKind::OpenClose,
            unit: "ops/s",
            threads: 2,
            warmup: 0.0,
            reps,
        };
        let group = [
            s("uvfs", vec![4.0e6, 4.4e6, 4.5e6]),
            s("kernel", vec![338_000.0]),
        ];
        assert_eq!(
            done_line(&group),
            "uvfs bench: open-close 2t: uvfs 4.40M, kernel 338.0k ops/s"
        );
        assert_eq!(short_rate(12.5), "12.5");
        assert_eq!(short_rate(2.5e9), "2.50G");
    }
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    /// Counts its operations; fails after `fail_after` if set.
    struct Counter {
        done: u64,
        fail_after: Option<u64>,
    }

    impl Worker for Counter {
        fn run(&mut self, n: u32) -> Result<()> {
            for _ in 0..n {
                if Some(self.done) == self.fail_after {
                    return Err(Error::msg("boom"));
                }
                self.done += 1;
                std::hint::black_box(self.done);
            }
            Ok(())
        }
    }

    #[test]
    fn measures_and_sums_threads() {
        let workers: Vec<Box<dyn Worker>> = (0..2)
            .map(|_| {
                Box::new(Counter {
                    done: 0,
                    fail_after: None,
                }) as Box<dyn Worker>
            })
            .collect();
        let m = measure(workers, 64, Duration::from_millis(30)).unwrap();
        assert_eq!(m.per_thread.len(), 2);
        assert!(m.rate > 0.0);
        for (ops, t) in m.per_thread {
            // Whole batches only, at least one each; no wall-clock bound (a thread can start
            // late on a loaded machine, and timing belongs in benchmarks, not tests).
            assert_eq!(ops % 64, 0);
            assert!(ops >= 64);
            assert!(t > Duration::ZERO);
        }
    }

    /// Counts its operations into `done`; its first batch first waits until
    /// `wait_for` (another worker's count) is nonzero, as a thread scheduled
    /// late would.
    struct Late {
        done: Arc<AtomicU64>,
        wait_for: Option<Arc<AtomicU64>>,
    }

    impl Worker for Late {
        fn run(&mut self, n: u32) -> Result<()> {
            if let Some(other) = self.wait_for.take() {
                // Relaxed: only the count matters, nothing is published.
                while other.load(Ordering::Relaxed) == 0 {
                    std::thread::yield_now();
                }
            }
            // Relaxed: as above.
            self.done.fetch_add(u64::from(n), Ordering::Relaxed);
            Ok(())
        }
    }

    /// Bug: rates were the sum of per-thread `ops / elapsed`, each thread
    /// timing its own window, so a thread that started late (more threads
    /// than cores) added a rate over a shorter window and inflated the
    /// total. Fix: total operations over one window common to all threads.
    #[test]
    fn rate_is_total_ops_over_the_common_window() {
        let early = Arc::new(AtomicU64::new(0));
        let late = Arc::new(AtomicU64::new(0));
        let workers: Vec<Box<dyn Worker>> = vec![
            Box::new(Late {
                done: Arc::clone(&early),
                wait_for: None,
            }),
            Box::new(Late {
                done: Arc::clone(&late),
                wait_for: Some(Arc::clone(&early)),
            }),
        ];
        let m = measure(workers, 64, Duration::from_millis(20)).unwrap();
        // Relaxed: the workers were joined, which orders their writes.
        let counts = [early.load(Ordering::Relaxed), late.load(Ordering::Relaxed)];
        let ops: Vec<u64> = m.per_thread.iter().map(|&(ops, _)| ops).collect();
        assert_eq!(ops, counts);
        let longest = m.per_thread.iter().map(|&(_, t)| t).max().unwrap();
        assert_eq!(m.window, longest);
        assert!(m.window > Duration::ZERO);
        let total = (counts[0] + counts[1]) as f64;
        assert_eq!(m.rate, total / m.window.as_secs_f64());
    }

    #[test]
    fn a_failing_worker_fails_the_run_early() {
        let workers: Vec<Box<dyn Worker>> = vec![
            Box::new(Counter {
                done: 0,
                fail_after: None,
            }),
            Box::new(Counter {
                done: 0,
                fail_after: Some(1000),
            }),
        ];
        let start = Instant::now();
        let e = measure(workers, 64, Duration::from_secs(10)).unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(5));
        assert_eq!(e.to_string(), "boom");
    }

    /// A target of `Counter` workers that supports only `syscall`.
    struct OnlySyscall;

    impl Target for OnlySyscall {
        fn name(&self) -> &str {
            "only-syscall"
        }

        fn description(&self) -> String {
            "counts".to_owned()
        }

        fn supports(&self, kind: WorkloadKind) -> bool {
            kind == WorkloadKind::Syscall
        }

        fn setup(
            &mut self,
            workload: &Workload,
            threads: usize,
        ) -> Result<Vec<Box<dyn Worker + '_>>> {
            assert_eq!(workload.kind(), WorkloadKind::Syscall, "run unsupported");
            Ok((0..threads)
                .map(|_| {
                    Box::new(Counter {
                        done: 0,
                        fail_after: None,
                    }) as Box<dyn Worker>
                })
                .collect())
        }

        fn teardown(&mut self) -> Result<()> {
            Ok(())
        }
    }

    /// A target is skipped for workloads it does not support: no run, no
    /// series, and the expected time counts only the pairs that run.
    #[test]
    fn skips_unsupported_workloads() {
        let mut targets: Vec<Box<dyn Target>> = vec![Box::new(OnlySyscall), Box::new(OnlySyscall)];
        let workloads = [
            Workload::FstatShared,
            Workload::Syscall,
            Workload::OpenClose,
        ];
        let plan = Plan {
            threads: vec![1, 2],
            reps: 2,
            duration: Duration::from_millis(10),
            warmup: Duration::from_millis(5),
        };
        assert_eq!(supported_pairs(&targets, &workloads), 2);
        assert_eq!(plan.expected(2), Duration::from_millis(2 * 2 * 25));
        let series = run_all(&mut targets, &workloads, &plan, &ProgressBar::hidden()).unwrap();
        assert_eq!(series.len(), 2 * 2);
        for s in &series {
            assert_eq!(s.workload, WorkloadKind::Syscall);
            assert_eq!(s.reps.len(), 2);
        }
    }

    #[test]
    fn median_min_max() {
        let s = Series {
            target: "t".into(),
            workload: WorkloadKind::Syscall,
            unit: "lps",
            threads: 1,
            warmup: 0.0,
            reps: vec![3.0, 1.0, 2.0, 10.0],
        };
        assert_eq!(s.median(), 2.5);
        assert_eq!(s.min(), 1.0);
        assert_eq!(s.max(), 10.0);
    }
}
