//! `uvfs bench`: the workloads of the patches uvfs learns from, run on uvfs
//! and, side by side in the same run, on the Linux kernel.
//!
//! Map of the crate:
//!
//! | module | what |
//! |---|---|
//! | [`workloads`] | the workloads (`syscall`, `creat-clo`, `futimes`, `tree`, `fstat-shared`, `read-shared`, `open-close`), their units, the host tree |
//! | [`calls`] | [`Calls`](calls::Calls): the calls the workloads make, one trait every target implements |
//! | [`loops`] | the workloads' loops, each written once over [`Calls`](calls::Calls) |
//! | [`target`] | [`Target`] and [`Worker`](target::Worker): what a workload runs on |
//! | [`uvfs_target`] | uvfs's embedded tmpfs through `uvfs::Task` |
//! | [`kernel`] | the kernel peer: real syscalls (rustix) on a host tmpfs, or in any [`kernel::KernelDir`] |
//! | [`uvfs_mount`] | the `mount` target: the kernel peer's syscalls in a fresh `uvfs mount` (FUSE) |
//! | [`passthrough_ll`] | the `passthrough-ll` target: the same in libfuse's `passthrough_ll` over a tmpfs, built at bench time |
//! | [`fuse_client`] | uvfs's FUSE client as a target: on an in-process uvfs server (ablation lesson 5) or on libfuse's `passthrough_ll` (`fuse-client`) |
//! | [`fuse_mount`] | a FUSE server as a child process: started, waited for in mountinfo, always stopped |
//! | [`worker_process`] | the `run` and `proot` targets: the kernel peer's loops in a `uvfs bench-worker` process under `uvfs run` or `proot` |
//! | `peers` | feature `peers`: other crates' in-memory file systems (`vfs` MemoryFS, wasmer's `mem_fs`); see [`peer_targets`] |
//! | [`harness`] | start gate, stop flag, interleaved repetitions, rates |
//! | [`interrupt`] | SIGINT/SIGTERM as a polled flag: stop, clean up, exit `128 + signal` |
//! | [`report`] | the table and the `--json` document |
//! | [`plot`] | the `--json` report's SVG plots, one per workload: rate vs threads per target |
//!
//! New peers (other crates) and ablation variants of uvfs are new
//! [`Target`]s; [`bench_targets`] runs any list of them.

#![warn(
    missing_docs,
    missing_debug_implementations,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks
)]

pub mod ablation;
#[cfg(feature = "audit")]
pub mod audit;
pub mod calls;
pub mod error;
pub mod fuse_client;
pub mod fuse_mount;
pub mod harness;
pub mod interrupt;
pub mod kernel;
pub mod loops;
pub mod passthrough_ll;
#[cfg(feature = "peers")]
pub mod peers;
pub mod plot;
pub mod report;
pub mod seccomp_floor;
pub mod snapshot;
pub mod target;
pub mod uvfs_mount;
pub mod uvfs_target;
pub mod worker_process;
pub mod workloads;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use error::{Error, Result};

use error::Context as _;
use harness::Plan;
use report::{Machine, Report, Settings, TargetInfo, TreeInfo};
use target::Target;
use workloads::{HostTree, Workload, WorkloadKind};

/// Arguments of `uvfs bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Workloads to run, repeatable or comma-separated [default: all].
    #[arg(
        long = "workload",
        value_name = "NAME",
        value_enum,
        value_delimiter = ','
    )]
    pub workloads: Vec<WorkloadKind>,

    /// Targets to run, repeatable or comma-separated; the first is the
    /// subject of the ratios [default: uvfs,kernel]. `mount` alone means
    /// mount,passthrough-ll,kernel (uvfs over FUSE against libfuse's
    /// passthrough_ll and the kernel's tmpfs); `fuse-client` alone means
    /// fuse-client,passthrough-ll,kernel (uvfs's FUSE client against the
    /// kernel's, on one passthrough_ll build); `run` alone means
    /// run,kernel,mount,proot. The peers (vfs-memoryfs,
    /// wasmer-memfs) exist in builds with `--features peers`.
    #[arg(
        long = "target",
        value_name = "NAME",
        value_enum,
        value_delimiter = ','
    )]
    pub targets: Vec<TargetKind>,

    /// Thread counts, comma-separated, e.g. 1,2 [default: 1 and all cores].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_threads)]
    pub threads: Vec<usize>,

    /// Seconds per measured run (fractions allowed, e.g. 0.2; at least
    /// 0.01).
    /// [default: 2, or 1 with --ablation]
    #[arg(long, value_name = "SECS", value_parser = parse_duration, allow_negative_numbers = true)]
    pub duration: Option<Duration>,

    /// Measured repetitions per workload, thread count and target (the
    /// median is reported) [default: 3, or 5 with --ablation].
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub reps: Option<u32>,

    /// Host directory tree the `tree` workload imports and reads.
    #[arg(long, value_name = "DIR", default_value = "/usr/include")]
    pub tree: PathBuf,

    /// Directory for the kernel peer and for passthrough-ll's source (a
    /// fresh subdirectory is made and removed) [default: a temporary tmpfs
    /// if it can be mounted, else a directory in /dev/shm, else a temporary
    /// directory].
    #[arg(long, value_name = "DIR")]
    pub host_dir: Option<PathBuf>,

    /// Also write every result, with each repetition's raw value, as JSON,
    /// and next to it one SVG plot per workload (`r.json` ->
    /// `r-syscall.svg`, ...; none if FILE is not a regular file).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Measure each lesson: its "before" variant against uvfs on the same code paths,
    /// interleaved, per-repetition ratios, the patch's figure beside (workloads
    /// fstat-shared, read-shared, open-close, creat-clo, futimes unless --workload; kernel and
    /// peers as context unless --target leaves them out).
    #[arg(long)]
    pub ablation: bool,

    /// Measure tmpfs snapshots instead of the workloads: --tree imported into uvfs, then
    /// --reps snapshots of it (default 5) against as many full copies through the
    /// facade, interleaved: time and resident memory each.
    #[arg(long, conflicts_with_all = ["ablation", "workloads", "targets", "threads", "json"])]
    pub snapshot: bool,

    /// Run the conflict audit instead of the workloads: two threads per workload, the cache
    /// lines one thread writes that the other touches and the locked instructions per loop,
    /// against budgets (exit status 1 over budget); --workload picks pairs, --json writes
    /// the report. Needs a build with `--features audit` (docs/audit.md).
    #[arg(long, conflicts_with_all = ["ablation", "snapshot", "targets", "threads", "reps", "duration"])]
    pub audit: bool,
}

/// The targets `uvfs bench` knows, as given to `--target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TargetKind {
    /// uvfs on its embedded tmpfs.
    Uvfs,
    /// The Linux kernel through system calls (a private tmpfs when it can mount one).
    Kernel,
    /// uvfs over hostfs bound to a fresh host directory (a private tmpfs when it can mount
    /// one, as `kernel`'s): the workloads on a host directory through uvfs.
    #[value(name = "uvfs-hostfs")]
    UvfsHostfs,
    /// `uvfs mount`: uvfs's tmpfs served over FUSE by this executable, the
    /// workloads through system calls in a fresh mount (module `uvfs_mount`).
    /// Alone, `--target mount` means mount, mount-uring, mount-uvfs-perms,
    /// passthrough-ll, kernel.
    Mount,
    /// `uvfs mount --transport uring`: as `mount`, served over FUSE io_uring rings (one
    /// per CPU); skipped with a message where the kernel does not offer them (not root,
    /// `/sys/module/fuse/parameters/enable_uring` missing or off).
    #[value(name = "mount-uring")]
    MountUring,
    /// `uvfs mount --permissions uvfs`: as `mount`, with the permission checks
    /// left to uvfs instead of the kernel (`default_permissions`), as
    /// `passthrough_ll` leaves them (it does none).
    #[value(name = "mount-uvfs-perms")]
    MountUvfsPerms,
    /// libfuse's `passthrough_ll` example over a private tmpfs, the
    /// workloads through system calls in its mount; built at bench time,
    /// skipped with a message if it cannot be (module `passthrough_ll`).
    #[value(name = "passthrough-ll")]
    PassthroughLl,
    /// uvfs's own FUSE client (`uvfs::fuse::client`) on libfuse's `passthrough_ll`,
    /// unmodified, over `/dev/fd/N`, serving a private tmpfs; the workloads through
    /// `uvfs::Task` (module `fuse_client`). Alone, `--target fuse-client` means
    /// fuse-client, passthrough-ll (the kernel's client on the same server build), kernel.
    #[value(name = "fuse-client")]
    FuseClient,
    /// `uvfs run`: the kernel target's loops in a separate program (`uvfs bench-worker`)
    /// under `uvfs run`, working on its tmpfs (module `worker_process`). Alone, `--target
    /// run` means run, kernel, mount, proot.
    Run,
    /// The same program under `proot` (found in `PATH`; skipped with a message if not),
    /// working on a private tmpfs like the kernel target's.
    Proot,
    /// A bare seccomp supervisor (`fstat-shared` only): processes calling `fstat(0)` under
    /// a filter that notifies only `fstat`, answered by one thread that does nothing else
    /// (module `seccomp_floor`): the floor under `run`'s time per notified call on this
    /// machine. Part of what `--target run` alone stands for.
    #[value(name = "seccomp-floor")]
    SeccompFloor,
    /// The `vfs` crate's `MemoryFS` (feature `peers`; see
    /// `peers::vfs_memory::VfsMemoryTarget`).
    #[cfg(feature = "peers")]
    #[value(name = "vfs-memoryfs")]
    VfsMemoryfs,
    /// wasmer's `virtual-fs` `mem_fs` (feature `peers`; see
    /// `peers::wasmer::WasmerTarget`).
    #[cfg(feature = "peers")]
    #[value(name = "wasmer-memfs")]
    WasmerMemfs,
}

impl TargetKind {
    /// The default targets, in default order (uvfs first: the ratios'
    /// subject). The peers are never in it: name them with `--target`, or
    /// take them all from [`peer_targets`].
    pub const ALL: [TargetKind; 2] = [TargetKind::Uvfs, TargetKind::Kernel];

    /// What `--target mount` alone stands for: `uvfs mount` (the subject),
    /// `uvfs mount --transport uring`, `uvfs mount --permissions uvfs`, libfuse's
    /// `passthrough_ll`, the kernel's tmpfs.
    pub const MOUNT: [TargetKind; 5] = [
        TargetKind::Mount,
        TargetKind::MountUring,
        TargetKind::MountUvfsPerms,
        TargetKind::PassthroughLl,
        TargetKind::Kernel,
    ];

    /// What `--target fuse-client` alone stands for: uvfs's FUSE client on
    /// `passthrough_ll` (the subject), the kernel's FUSE client on the same build, the
    /// kernel's tmpfs.
    pub const FUSE_CLIENT: [TargetKind; 3] = [
        TargetKind::FuseClient,
        TargetKind::PassthroughLl,
        TargetKind::Kernel,
    ];

    /// What `--target run` alone stands for: `uvfs run` (the subject), the kernel's tmpfs,
    /// `uvfs mount`, `proot`, and the bare supervisor's floor (`fstat-shared` only).
    pub const RUN: [TargetKind; 5] = [
        TargetKind::Run,
        TargetKind::Kernel,
        TargetKind::Mount,
        TargetKind::Proot,
        TargetKind::SeccompFloor,
    ];
}

/// The peer targets (other crates' file systems), fresh, in a fixed order:
/// `vfs-memoryfs`, `wasmer-memfs`; empty when built without the `peers`
/// feature. For modes that compare uvfs with every peer there is:
/// `--ablation` appends them, as context after the kernel, when `--target`
/// is not given.
///
/// # Errors
///
/// Creating a peer's working directory failed.
pub fn peer_targets() -> Result<Vec<Box<dyn Target>>> {
    #[cfg(feature = "peers")]
    {
        peers::targets()
    }
    #[cfg(not(feature = "peers"))]
    {
        Ok(Vec::new())
    }
}

/// Parses a thread count: an integer from 1 to 4096.
fn parse_threads(s: &str) -> std::result::Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=4096).contains(&n) => Ok(n),
        _ => Err(format!("`{s}` is not a thread count from 1 to 4096")),
    }
}

/// Parses a duration in seconds: a number from 0.01 (shorter runs measure
/// little but the start and stop) to 3600 (one hour).
fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    match s.trim().parse::<f64>() {
        Ok(secs) if (0.01..=3600.0).contains(&secs) => Ok(Duration::from_secs_f64(secs)),
        _ => Err(format!(
            "`{s}` is not a number of seconds from 0.01 to 3600"
        )),
    }
}

/// What [`bench()`] prints in an audit build (feature `audit`).
#[cfg(feature = "audit")]
pub const AUDIT_BUILD_WARNING: &str = "uvfs bench: WARNING: this is an audit build (--features \
     audit): every atomic and lock of uvfs is a recording wrapper, so these timings are NOT \
     representative of uvfs; measure with a build without the feature, and use this one only \
     for `uvfs bench --audit`";

/// Runs `uvfs bench` with `args`: uvfs and the kernel peer, every selected
/// workload and thread count. Prints the header before running and the
/// table after to stdout, a progress bar to stderr on long runs, and writes
/// `--json` (opened before the run, so a bad path fails at once) and, when
/// it is a regular file, one SVG plot per workload next to it (see
/// [`plot::write_svgs`]), printing their paths after the table. A failed run
/// writes neither.
///
/// Stops early, cleaning up, once [`interrupt::install`]'s handlers have
/// seen SIGINT or SIGTERM.
///
/// In a build with the feature `audit` it prints [`AUDIT_BUILD_WARNING`] to stderr before
/// and after the run: there every atomic and lock of uvfs is a recording wrapper, so its
/// timings are not uvfs's.
///
/// # Errors
///
/// Any failure (opening the JSON file, reading the tree, a workload's call,
/// an interruption, cleaning up, writing the JSON or a plot) ends the
/// benchmark with an error saying where it happened.
pub fn bench(args: &BenchArgs) -> Result<Report> {
    #[cfg(feature = "audit")]
    eprintln!("{AUDIT_BUILD_WARNING}");
    let json = args.json.as_deref().map(JsonFile::open).transpose()?;
    let report = bench_with(args);
    #[cfg(feature = "audit")]
    eprintln!("{AUDIT_BUILD_WARNING}");
    match (report, json) {
        (Ok(report), Some(json)) => {
            let path = json.path.clone();
            let regular = json.is_regular();
            json.write(&report)?;
            // The plots go next to a real file, not next to /dev/null or a pipe.
            if regular {
                let plots = plot::write_svgs(&report, &path)?;
                if !plots.is_empty() {
                    let names: Vec<String> =
                        plots.iter().map(|p| p.display().to_string()).collect();
                    print_flush(&format!("plots: {}\n", names.join(", ")));
                }
            }
            Ok(report)
        }
        (Ok(report), None) => Ok(report),
        (Err(e), json) => {
            if let Some(json) = json {
                json.discard();
            }
            Err(e)
        }
    }
}

/// [`bench`] without the JSON file.
fn bench_with(args: &BenchArgs) -> Result<Report> {
    if args.snapshot {
        return Err(Error::msg(
            "--snapshot prints its own table: call uvfs_bench::snapshot::run",
        ));
    }
    let kinds = dedup(if !args.workloads.is_empty() {
        args.workloads.clone()
    } else if args.ablation {
        ablation::WORKLOADS.to_vec()
    } else {
        WorkloadKind::ALL.to_vec()
    });
    if args.ablation {
        if let Some(k) = kinds.iter().find(|k| !ablation::WORKLOADS.contains(k)) {
            let names: Vec<&str> = ablation::WORKLOADS.iter().map(|w| w.name()).collect();
            return Err(Error::msg(format!(
                "--ablation: no lesson is measured with workload {k}; use {}",
                names.join(", ")
            )));
        }
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = dedup(if args.threads.is_empty() {
        vec![1, cores]
    } else {
        args.threads.clone()
    });
    let (reps, duration) = if args.ablation {
        (
            ablation::DEFAULT_REPS,
            Duration::from_secs_f64(ablation::DEFAULT_DURATION_S),
        )
    } else {
        (3, Duration::from_secs(2))
    };
    let duration = args.duration.unwrap_or(duration);
    let plan = Plan {
        threads,
        reps: args.reps.unwrap_or(reps),
        duration,
        warmup: Plan::warmup_for(duration),
    };
    let mut tree: Option<Arc<HostTree>> = None;
    let mut workloads = Vec::with_capacity(kinds.len());
    for kind in &kinds {
        workloads.push(match kind {
            WorkloadKind::Syscall => Workload::Syscall,
            WorkloadKind::CreatClo => Workload::CreatClo,
            WorkloadKind::Futimes => Workload::Futimes,
            WorkloadKind::FstatShared => Workload::FstatShared,
            WorkloadKind::ReadShared => Workload::ReadShared,
            WorkloadKind::OpenClose => Workload::OpenClose,
            WorkloadKind::StatPath => Workload::StatPath,
            WorkloadKind::Tree => {
                let t = Arc::new(HostTree::read(&args.tree)?);
                tree = Some(Arc::clone(&t));
                Workload::Tree(t)
            }
        });
    }
    let target_kinds = dedup(if args.targets.is_empty() {
        TargetKind::ALL.to_vec()
    } else if args.targets.iter().all(|&k| k == TargetKind::Mount) {
        TargetKind::MOUNT.to_vec()
    } else if args.targets.iter().all(|&k| k == TargetKind::FuseClient) {
        TargetKind::FUSE_CLIENT.to_vec()
    } else if args.targets.iter().all(|&k| k == TargetKind::Run) {
        TargetKind::RUN.to_vec()
    } else {
        args.targets.clone()
    });
    // One server thread per worker thread of the largest run.
    let mount_threads = plan.threads.iter().copied().max().unwrap_or(1);
    let mut targets: Vec<Box<dyn Target>> = Vec::with_capacity(target_kinds.len());
    if args.ablation {
        // uvfs first (the subject), then the variants, then the context targets.
        targets.push(Box::new(uvfs_target::UvfsTarget::new()?));
        targets.extend(ablation::variant_targets(mount_threads)?);
    }
    for kind in target_kinds {
        if args.ablation && kind == TargetKind::Uvfs {
            continue;
        }
        targets.push(match kind {
            TargetKind::Uvfs => Box::new(uvfs_target::UvfsTarget::new()?),
            TargetKind::UvfsHostfs => {
                let host = kernel::HostDir::create(args.host_dir.as_deref())?;
                Box::new(uvfs_target::UvfsTarget::hostfs(host)?)
            }
            TargetKind::Kernel => {
                let host = kernel::HostDir::create(args.host_dir.as_deref())?;
                Box::new(kernel::KernelTarget::new(host)?)
            }
            TargetKind::Mount => {
                let mount = uvfs_mount::UvfsMount::start_self(mount_threads, &[])?;
                Box::new(kernel::KernelTarget::on("mount", Box::new(mount))?)
            }
            TargetKind::MountUring => {
                if !rustix::process::geteuid().is_root() || !uvfs::fuse::uring_enabled() {
                    print_flush(
                        "skipping mount-uring: FUSE over io_uring needs root and \
                         /sys/module/fuse/parameters/enable_uring = Y\n",
                    );
                    continue;
                }
                let extra = ["--transport", "uring"];
                let mount = uvfs_mount::UvfsMount::start_self(mount_threads, &extra)?;
                Box::new(kernel::KernelTarget::on("mount-uring", Box::new(mount))?)
            }
            TargetKind::MountUvfsPerms => {
                let extra = ["--permissions", "uvfs"];
                let mount = uvfs_mount::UvfsMount::start_self(mount_threads, &extra)?;
                Box::new(kernel::KernelTarget::on(
                    "mount-uvfs-perms",
                    Box::new(mount),
                )?)
            }
            TargetKind::PassthroughLl => {
                let build = match passthrough_ll::Build::new() {
                    Ok(build) => build,
                    Err(why) => {
                        print_flush(&format!("skipping passthrough-ll: {why}\n"));
                        continue;
                    }
                };
                let dir = passthrough_ll::PassthroughLl::start(build, args.host_dir.as_deref())?;
                Box::new(kernel::KernelTarget::on("passthrough-ll", Box::new(dir))?)
            }
            TargetKind::FuseClient => {
                let build = match passthrough_ll::Build::new() {
                    Ok(build) => build,
                    Err(why) => {
                        print_flush(&format!("skipping fuse-client: {why}\n"));
                        continue;
                    }
                };
                fuse_client::passthrough_ll(build, args.host_dir.as_deref())?
            }
            TargetKind::Run => {
                let exe = std::env::current_exe()
                    .map_err(|e| Error::new("run: finding the uvfs executable", e))?;
                let tree = tree.as_ref().map(|t| t.root.as_path());
                Box::new(worker_process::WorkerProcess::start(
                    worker_process::Wrapper::UvfsRun,
                    &exe,
                    tree,
                    None,
                )?)
            }
            TargetKind::Proot => {
                if worker_process::find_in_path("proot").is_none() {
                    print_flush(
                        "skipping proot: no `proot` in PATH (Debian: apt-get install proot)\n",
                    );
                    continue;
                }
                let exe = std::env::current_exe()
                    .map_err(|e| Error::new("proot: finding the uvfs executable", e))?;
                let tree = tree.as_ref().map(|t| t.root.as_path());
                Box::new(worker_process::WorkerProcess::start(
                    worker_process::Wrapper::Proot,
                    &exe,
                    tree,
                    args.host_dir.as_deref(),
                )?)
            }
            TargetKind::SeccompFloor => match seccomp_floor::SeccompFloor::new() {
                Ok(t) => Box::new(t),
                Err(why) => {
                    print_flush(&format!("skipping seccomp-floor: {why}\n"));
                    continue;
                }
            },
            #[cfg(feature = "peers")]
            TargetKind::VfsMemoryfs => Box::new(peers::vfs_memory::VfsMemoryTarget::new()?),
            #[cfg(feature = "peers")]
            TargetKind::WasmerMemfs => Box::new(peers::wasmer::WasmerTarget::new()?),
        });
    }
    if args.ablation && args.targets.is_empty() {
        // Context after the kernel: every peer this build has (none without
        // `--features peers`); `--target` names them one by one instead.
        targets.extend(peer_targets()?);
    }
    if targets.is_empty() {
        // Only a skipped target (passthrough-ll) was asked for.
        return Err(Error::msg("no target left to run"));
    }
    let settings = Settings {
        workloads: kinds,
        threads: plan.threads.clone(),
        reps: plan.reps,
        duration_s: plan.duration.as_secs_f64(),
        warmup_s: plan.warmup.as_secs_f64(),
    };
    let tree_info = tree.as_ref().map(|t| TreeInfo {
        root: t.root.display().to_string(),
        stats: t.stats,
    });
    if args.ablation {
        let mut report = run_targets(targets, &workloads, &plan, settings, tree_info)?;
        report.ablation = ablation::rows(
            &report
                .results
                .iter()
                .map(|r| r.series.clone())
                .collect::<Vec<_>>(),
            &plan.threads,
        );
        print_flush(&format!("\n{}", ablation::table(&report)));
        return Ok(report);
    }
    let report = bench_targets(targets, &workloads, &plan, settings, tree_info)?;
    if let Some(line) = uvfs_mount::goal(&report) {
        print_flush(&format!("{line}\n"));
    }
    for line in worker_process::goal_lines(&report) {
        print_flush(&format!("{line}\n"));
    }
    Ok(report)
}

/// Runs `workloads` under `plan` on `targets` (the first is the subject of
/// the ratios), printing the header first and the table last, then closes
/// every target (also on error).
///
/// # Errors
///
/// The first failed run or close.
pub fn bench_targets(
    targets: Vec<Box<dyn Target>>,
    workloads: &[Workload],
    plan: &Plan,
    settings: Settings,
    tree: Option<TreeInfo>,
) -> Result<Report> {
    let report = run_targets(targets, workloads, plan, settings, tree)?;
    print_flush(&format!("\n{}", report.table()));
    Ok(report)
}

/// Like [`bench_targets`] without printing the table (the caller prints its own, as
/// `--ablation` does).
///
/// # Errors
///
/// The first failed run or close.
pub fn run_targets(
    mut targets: Vec<Box<dyn Target>>,
    workloads: &[Workload],
    plan: &Plan,
    settings: Settings,
    tree: Option<TreeInfo>,
) -> Result<Report> {
    let infos: Vec<TargetInfo> = targets
        .iter()
        .map(|t| TargetInfo {
            name: t.name().to_owned(),
            description: t.description(),
        })
        .collect();
    let mut report = Report::new(Machine::detect(), settings, infos, tree, Vec::new());
    print_flush(&report.header());
    let pairs = harness::supported_pairs(&targets, workloads);
    let progress = harness::progress_bar(plan.expected(pairs));
    let series = harness::run_all(&mut targets, workloads, plan, &progress);
    progress.finish_and_clear();
    let mut closed = Ok(());
    for t in targets {
        let name = t.name().to_owned();
        let r = t
            .close()
            .map_err(|e| Error::new(format!("closing {name}"), e));
        closed = closed.and(r);
    }
    let series = match (series, closed) {
        (Ok(series), Ok(())) => series,
        (Err(e), Ok(())) | (Ok(_), Err(e)) => return Err(e),
        // Say both: the cleanup's failure may have left files behind.
        (Err(e), Err(c)) => return Err(Error::msg(format!("{e}; then {c}"))),
    };
    report = Report::new(
        report.machine,
        report.settings,
        report.targets,
        report.tree,
        series,
    );
    Ok(report)
}

/// Writes `report` as pretty JSON to `path`.
///
/// # Errors
///
/// The file cannot be created or written.
pub fn write_json(report: &Report, path: &Path) -> Result<()> {
    JsonFile::open(path)?.write(report)
}

/// The `--json` file, opened before the run so that a bad path fails at
/// once, written after it.
#[derive(Debug)]
struct JsonFile {
    /// The open file, not yet truncated (an old report stays until the new
    /// one is written).
    file: std::fs::File,
    /// Its path, for messages.
    path: PathBuf,
    /// Whether `open` created it (so `discard` removes it).
    created: bool,
}

impl JsonFile {
    /// Opens `path` for writing, creating it if needed.
    fn open(path: &Path) -> Result<JsonFile> {
        let creating = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path);
        let (file, created) = match creating {
            Ok(file) => (Ok(file), true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                (std::fs::OpenOptions::new().write(true).open(path), false)
            }
            Err(e) => (Err(e), false),
        };
        let file = file.with_context(|| format!("--json: creating {}", path.display()))?;
        Ok(JsonFile {
            file,
            path: path.to_path_buf(),
            created,
        })
    }

    /// Whether it is a regular file (not /dev/null, a pipe or a terminal).
    fn is_regular(&self) -> bool {
        self.file.metadata().map(|m| m.is_file()).unwrap_or(false)
    }

    /// Replaces the file's contents with `report` as pretty JSON.
    fn write(self, report: &Report) -> Result<()> {
        let path = self.path.display();
        // Only regular files can (and need to) be truncated: /dev/null or a pipe cannot.
        if self.is_regular() {
            self.file
                .set_len(0)
                .with_context(|| format!("--json: truncating {path}"))?;
        }
        let mut w = std::io::BufWriter::new(&self.file);
        serde_json::to_writer_pretty(&mut w, report)
            .with_context(|| format!("--json: writing {path}"))?;
        w.write_all(b"\n")
            .and_then(|()| w.flush())
            .with_context(|| format!("--json: writing {path}"))
    }

    /// Removes the file if `open` created it (the run failed: no report).
    fn discard(self) {
        if self.created {
            drop(self.file);
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Prints `s` to stdout now (before a long run starts).
fn print_flush(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
}

/// `v` without repeated elements, first occurrences kept in order.
fn dedup<T: PartialEq + Copy>(v: Vec<T>) -> Vec<T> {
    let mut out = Vec::with_capacity(v.len());
    for x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_durations_and_threads() {
        assert_eq!(parse_duration("0.2"), Ok(Duration::from_millis(200)));
        assert_eq!(parse_duration("0.01"), Ok(Duration::from_millis(10)));
        assert!(parse_duration("1e-9").is_err());
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("nan").is_err());
        assert!(parse_duration("inf").is_err());
        assert_eq!(parse_threads("2"), Ok(2));
        assert!(parse_threads("0").is_err());
        assert!(parse_threads("x").is_err());
        assert_eq!(dedup(vec![1, 2, 1, 3]), vec![1, 2, 3]);
    }

    /// `uvfs bench` with `argv` (after `bench`).
    fn args(argv: &[&str]) -> BenchArgs {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: BenchArgs,
        }
        <Cli as clap::Parser>::parse_from(std::iter::once("bench").chain(argv.iter().copied())).args
    }

    /// `--duration -1` reaches the range check (clap used to read `-1` as a flag).
    #[test]
    fn negative_duration_is_a_range_error() {
        #[derive(clap::Parser, Debug)]
        struct Cli {
            #[command(flatten)]
            args: BenchArgs,
        }
        let e = <Cli as clap::Parser>::try_parse_from(["bench", "--duration", "-1"]).unwrap_err();
        assert!(e.to_string().contains("not a number of seconds"), "{e}");
    }

    /// `--ablation` refuses a workload no lesson is measured with, before running anything.
    #[test]
    fn ablation_rejects_workloads_without_a_lesson() {
        let e = bench(&args(&["--ablation", "--workload", "syscall"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no lesson is measured with workload syscall"),
            "{e}"
        );
    }

    /// Bug: a bad `--json` path failed only after the whole run. Fix: the
    /// file is opened before anything runs (here, before the missing tree
    /// is read), written at the end.
    #[test]
    fn json_file_is_opened_first_and_written_last() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("no/such/dir/r.json");
        let e = bench(&args(&[
            "--json",
            bad.to_str().unwrap(),
            "--tree",
            dir.path().join("missing").to_str().unwrap(),
            "--workload",
            "tree",
        ]))
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("--json: creating"), "{e}");

        // A file it created is removed when the run fails.
        let path = dir.path().join("r.json");
        JsonFile::open(&path).unwrap().discard();
        assert!(!path.exists());
        // An old report stays until the new one replaces it whole.
        std::fs::write(&path, "x".repeat(100_000)).unwrap();
        let json = JsonFile::open(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 100_000);
        let settings = Settings {
            workloads: vec![WorkloadKind::Syscall],
            threads: vec![1],
            reps: 7,
            duration_s: 1.0,
            warmup_s: 0.25,
        };
        let report = Report::new(Machine::detect(), settings, Vec::new(), None, Vec::new());
        json.write(&report).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(v["settings"]["reps"], 7);
        JsonFile::open(&path).unwrap().discard();
        assert!(path.exists(), "an existing file is kept");
    }

    /// A run writes the JSON and one plot per workload next to it; a failed
    /// run writes neither; `--json /dev/null` gets no plots.
    #[test]
    fn plots_are_written_next_to_the_json_after_a_run() {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("r.json");
        let quick = |json: &Path, workload: &str| {
            bench(&args(&[
                "--json",
                json.to_str().unwrap(),
                "--target",
                "uvfs",
                "--workload",
                workload,
                "--threads",
                "1",
                "--duration",
                "0.01",
                "--reps",
                "1",
                "--tree",
                dir.path().join("missing").to_str().unwrap(),
            ]))
        };
        let listing = || {
            let mut names: Vec<String> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        };
        quick(&json, "tree").unwrap_err();
        assert!(listing().is_empty(), "{:?}", listing());
        quick(&json, "syscall").unwrap();
        assert_eq!(listing(), ["r-syscall.svg", "r.json"]);
        quick(Path::new("/dev/null"), "syscall").unwrap();
        assert!(!Path::new("/dev/null-syscall.svg").exists());
    }
}
