//! The `uvfs` command: `uvfs bench` runs the benchmark workloads on uvfs and,
//! side by side, on the Linux kernel; `uvfs mount DIR` serves a uvfs tmpfs at `DIR`
//! over FUSE.

#![warn(missing_docs, missing_debug_implementations)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod mount;

/// mimalloc: uvfs frees through epoch reclamation, often on another thread than the one
/// that allocated; glibc's arenas serialise those cross-thread frees (seen as `_int_free`
/// and `malloc_consolidate` at the top of a 2-thread creat-clo profile). A Linux kernel
/// would use its slab allocator; an embedding application chooses its own allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A userspace file layer that scales with cores.
#[derive(Debug, Parser)]
#[command(name = "uvfs", version, about)]
struct Cli {
    /// What to do.
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Run the benchmark workloads on uvfs and on the kernel, side by side.
    ///
    /// With no options: every workload, 1 thread and all cores, 3 repetitions
    /// of 2 s each, medians reported.
    Bench(uvfs_bench::BenchArgs),
    /// Serve a fresh uvfs tmpfs at MOUNTPOINT over FUSE until Ctrl-C (SIGINT), SIGTERM or
    /// an unmount from outside (in the background with --daemon); then exit 0.
    Mount(mount::MountArgs),
    /// Run CMD on a private uvfs tmpfs, with host directories bound read-only at the same
    /// paths (/usr, /bin, /lib*, /etc, /dev, ...), without root or FUSE; exits with CMD's
    /// status. See docs/run.md.
    Run(RunArgs),
    /// The worker process of `uvfs bench --target run,proot`: runs requests read from
    /// stdin on the kernel target in a fresh directory under --dir, one answer per line
    /// on stdout (uvfs_bench::worker_process).
    #[command(hide = true)]
    BenchWorker(BenchWorkerArgs),
}

/// `uvfs bench-worker --dir DIR [--tree DIR]`.
#[derive(Debug, clap::Args)]
struct BenchWorkerArgs {
    /// Where the run directories are made.
    #[arg(long, value_name = "DIR")]
    dir: std::path::PathBuf,
    /// The tree the `tree` workload imports.
    #[arg(long, value_name = "DIR")]
    tree: Option<std::path::PathBuf>,
}

/// `uvfs run [OPTIONS] -- CMD [ARGS...]`.
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Bind a host directory at PATH (absolute, not `/`; read-write unless `:ro`);
    /// repeatable. A bind of a default PATH replaces the default one.
    #[arg(long, value_name = "HOST:PATH[:ro|rw]", value_parser = uvfs_run::Bind::parse)]
    bind: Vec<uvfs_run::Bind>,
    /// A fresh tmpfs at PATH (absolute, not `/`); repeatable.
    #[arg(long, value_name = "PATH", value_parser = uvfs_run::parse_tmpfs)]
    tmpfs: Vec<String>,
    /// No default binds: the program sees only the tmpfs and the --bind/--tmpfs mounts.
    #[arg(long)]
    no_default_binds: bool,
    /// Copy a host tree into the tmpfs at PATH before the program starts; repeatable.
    #[arg(long, value_name = "HOST_DIR:PATH", value_parser = parse_import)]
    import: Vec<(std::path::PathBuf, String)>,
    /// Copy the tree at PATH out to HOST_DIR after the program exits; repeatable.
    #[arg(long, value_name = "PATH:HOST_DIR", value_parser = parse_export)]
    export: Vec<(String, std::path::PathBuf)>,
    /// The program and its arguments: everything from the first argument that is not
    /// one of the options above (`uvfs run ls -l`), or after `--`.
    #[arg(trailing_var_arg = true, required = true, value_name = "CMD")]
    cmd: Vec<std::ffi::OsString>,
}

/// `HOST_DIR:PATH`.
fn parse_import(s: &str) -> Result<(std::path::PathBuf, String), String> {
    let (h, p) = s.rsplit_once(':').ok_or("expected HOST_DIR:PATH")?;
    if !p.starts_with('/') {
        return Err(format!("PATH {p} is not absolute"));
    }
    Ok((h.into(), p.to_owned()))
}

/// `PATH:HOST_DIR`. A HOST_DIR that exists must be a directory (a symlink to one is
/// followed): checked before the program runs, not after (a fresh-user trial lost a run's
/// work and exit status to `--export /build:FILE`).
fn parse_export(s: &str) -> Result<(String, std::path::PathBuf), String> {
    let (p, h) = s.split_once(':').ok_or("expected PATH:HOST_DIR")?;
    if !p.starts_with('/') {
        return Err(format!("PATH {p} is not absolute"));
    }
    match std::fs::metadata(h) {
        Ok(m) if !m.is_dir() => return Err(format!("HOST_DIR {h} is not a directory")),
        _ => {}
    }
    Ok((p.to_owned(), h.into()))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Mount(args) => {
            if let Err(e) = uvfs_bench::interrupt::install() {
                mount::say!("uvfs mount: error: {e}");
                return ExitCode::FAILURE;
            }
            let code = match mount::run(&args) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    mount::say!("uvfs mount: error: {e}");
                    ExitCode::FAILURE
                }
            };
            // A daemon's `--log`: every line written before it exits.
            mount::finish_log();
            code
        }
        Command::BenchWorker(args) => {
            match uvfs_bench::worker_process::serve(&args.dir, args.tree.as_deref()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("uvfs bench-worker: error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Run(args) => {
            if let Some(msg) = uvfs_run::duplicate_mount_point(&args.bind, &args.tmpfs) {
                // A usage error, as clap's own: exit status 2.
                use clap::CommandFactory;
                Cli::command()
                    .error(clap::error::ErrorKind::ArgumentConflict, msg)
                    .exit();
            }
            let opts = uvfs_run::RunOptions {
                argv: args.cmd,
                binds: args.bind,
                tmpfs: args.tmpfs,
                no_default_binds: args.no_default_binds,
                imports: args.import,
                exports: args.export,
            };
            match uvfs_run::run(&opts) {
                Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX)),
                Err(e) => {
                    // One prefix for every message of uvfs run's own.
                    match e.strip_prefix("uvfs run: ") {
                        Some(_) => eprintln!("{e}"),
                        None => eprintln!("uvfs run: {e}"),
                    }
                    ExitCode::from(125)
                }
            }
        }
        Command::Bench(args) => {
            // SIGINT/SIGTERM stop the run and let it clean up (temporary
            // directories, the kernel peer's tmpfs) before we exit.
            if let Err(e) = uvfs_bench::interrupt::install() {
                eprintln!("uvfs bench: error: {e}");
                return ExitCode::FAILURE;
            }
            let r = if args.snapshot {
                uvfs_bench::snapshot::run(&args.tree, args.reps.unwrap_or(5))
            } else if args.audit {
                match audit(&args) {
                    Ok(true) => return ExitCode::SUCCESS,
                    Ok(false) => {
                        eprintln!("uvfs bench --audit: over budget (see the table)");
                        return ExitCode::FAILURE;
                    }
                    Err(e) => Err(e),
                }
            } else {
                uvfs_bench::bench(&args).map(drop)
            };
            match r {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => match uvfs_bench::interrupt::received() {
                    // 128 + signal, as a shell reports a process the signal
                    // killed.
                    Some(sig) => {
                        eprintln!("uvfs bench: {e}");
                        ExitCode::from(u8::try_from(128 + sig).unwrap_or(u8::MAX))
                    }
                    None => {
                        eprintln!("uvfs bench: error: {e}");
                        ExitCode::FAILURE
                    }
                },
            }
        }
    }
}

/// `uvfs bench --audit`: runs the conflict audit (the pairs of `--workload`, or all), writes
/// `--json`, and says whether every pair is within its budget.
#[cfg(feature = "audit")]
fn audit(args: &uvfs_bench::BenchArgs) -> uvfs_bench::error::Result<bool> {
    let names: Vec<&str> = args.workloads.iter().map(|w| w.name()).collect();
    let report = uvfs_bench::audit::run(&names)?;
    if let Some(path) = &args.json {
        report.write_json(path)?;
    }
    Ok(!report.over_budget())
}

/// `uvfs bench --audit` in a build without the recorder: says how to get one.
#[cfg(not(feature = "audit"))]
fn audit(_: &uvfs_bench::BenchArgs) -> uvfs_bench::error::Result<bool> {
    Err(uvfs_bench::error::Error::msg(
        "--audit needs the recording build: cargo run --release --features audit -- bench --audit",
    ))
}
