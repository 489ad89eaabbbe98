//! The results: a text table (medians, spread, scaling over one thread,
//! ratio of the first target to each other one) and the JSON document
//! written by `--json`, with every repetition's raw value.

use std::fmt::Write as _;

use serde::Serialize;

use crate::harness::Series;
use crate::workloads::{TreeStats, WorkloadKind, SYSCALL_INDEX_BASELINE};

/// The machine a report was measured on.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// CPUs this process may run on (`available_parallelism`).
    pub cores: usize,
    /// CPU model, from `/proc/cpuinfo` (empty if unknown).
    pub cpu: String,
    /// Kernel release, from `/proc/sys/kernel/osrelease` (empty if unknown).
    pub kernel: String,
}

impl Machine {
    /// Describes this machine; fields that cannot be read are left empty.
    pub fn detect() -> Machine {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_default();
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();
        Machine { cores, cpu, kernel }
    }
}

/// What a run was asked to do.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// Workloads, in run order.
    pub workloads: Vec<WorkloadKind>,
    /// Thread counts, in run order.
    pub threads: Vec<usize>,
    /// Measured repetitions per (target, workload, threads).
    pub reps: u32,
    /// Length of one measured run, in seconds.
    pub duration_s: f64,
    /// Length of the discarded warm-up run, in seconds.
    pub warmup_s: f64,
}

/// A target as named in the report.
#[derive(Debug, Clone, Serialize)]
pub struct TargetInfo {
    /// Its short name (table column).
    pub name: String,
    /// What it is, in one line.
    pub description: String,
}

/// The tree the `tree` workload read.
#[derive(Debug, Clone, Serialize)]
pub struct TreeInfo {
    /// The host directory it was read from.
    pub root: String,
    /// What it held.
    pub stats: TreeStats,
}

/// One (target, workload, threads) result with its summary statistics.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesReport {
    /// The raw values.
    #[serde(flatten)]
    pub series: Series,
    /// Median of the repetitions, ops/s.
    pub median: f64,
    /// Slowest repetition, ops/s.
    pub min: f64,
    /// Fastest repetition, ops/s.
    pub max: f64,
    /// This median over the same target's and workload's 1-thread median,
    /// when 1 thread was run.
    pub scaling: Option<f64>,
    /// UnixBench's index (`lps / 15000 × 10`), for `syscall` only.
    pub index: Option<f64>,
}

/// The first target's median over another target's, for one workload and
/// thread count.
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    /// The workload.
    pub workload: WorkloadKind,
    /// Worker threads.
    pub threads: usize,
    /// The first target (uvfs).
    pub subject: String,
    /// The other target (the kernel, or another peer).
    pub peer: String,
    /// `subject median / peer median`.
    pub ratio: f64,
}

/// Everything one `uvfs bench` measured; serialized by `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// When the run ended, seconds since the Unix epoch.
    pub date_unix: u64,
    /// Where it ran.
    pub machine: Machine,
    /// What it was asked to do.
    pub settings: Settings,
    /// The targets, the first being the subject of the ratios.
    pub targets: Vec<TargetInfo>,
    /// The tree read, if the `tree` workload ran.
    pub tree: Option<TreeInfo>,
    /// One entry per (workload, threads, target), in run order.
    pub results: Vec<SeriesReport>,
    /// First target over each other target, per (workload, threads).
    pub ratios: Vec<Ratio>,
    /// `--ablation`: each lesson's before/after rows (empty otherwise, and then left out).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ablation: Vec<AblationRow>,
}

impl Report {
    /// Builds the report from the harness's series.
    pub fn new(
        machine: Machine,
        settings: Settings,
        targets: Vec<TargetInfo>,
        tree: Option<TreeInfo>,
        series: Vec<Series>,
    ) -> Report {
        let one_thread = |s: &Series| {
            series
                .iter()
                .find(|o| o.target == s.target && o.workload == s.workload && o.threads == 1)
                .map(Series::median)
        };
        let results: Vec<SeriesReport> = series
            .iter()
            .map(|s| {
                let median = s.median();
                SeriesReport {
                    median,
                    min: s.min(),
                    max: s.max(),
                    scaling: one_thread(s).filter(|&m| m > 0.0).map(|m| median / m),
                    index: (s.workload == WorkloadKind::Syscall)
                        .then(|| median / SYSCALL_INDEX_BASELINE * 10.0),
                    series: s.clone(),
                }
            })
            .collect();
        let mut ratios = Vec::new();
        if let Some(subject) = targets.first() {
            for r in results.iter().filter(|r| r.series.target == subject.name) {
                for peer in results.iter().filter(|p| {
                    p.series.target != subject.name
                        && p.series.workload == r.series.workload
                        && p.series.threads == r.series.threads
                }) {
                    if peer.median > 0.0 {
                        ratios.push(Ratio {
                            workload: r.series.workload,
                            threads: r.series.threads,
                            subject: subject.name.clone(),
                            peer: peer.series.target.clone(),
                            ratio: r.median / peer.median,
                        });
                    }
                }
            }
        }
        let date_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Report {
            date_unix,
            machine,
            settings,
            targets,
            tree,
            results,
            ratios,
            ablation: Vec::new(),
        }
    }

    /// The header: what was run, on what, and how to read it.
    pub fn header(&self) -> String {
        let mut out = String::new();
        let m = &self.machine;
        let s = &self.settings;
        let _ = writeln!(
            out,
            "uvfs bench: {} reps of {:.2} s after a {:.2} s warm-up; threads {}",
            s.reps,
            s.duration_s,
            s.warmup_s,
            join(s.threads.iter().map(ToString::to_string), ",")
        );
        let _ = writeln!(
            out,
            "machine: {} cores, {}, Linux {}",
            m.cores,
            if m.cpu.is_empty() {
                "cpu unknown"
            } else {
                &m.cpu
            },
            if m.kernel.is_empty() { "?" } else { &m.kernel }
        );
        for t in &self.targets {
            let _ = writeln!(out, "{}: {}", t.name, t.description);
        }
        if let Some(tree) = &self.tree {
            let st = &tree.stats;
            let _ = writeln!(
                out,
                "tree: {}: {} files ({:.1} MiB), {} dirs, {} symlinks, {} skipped (other types, \
                 unreadable or pseudo files); copied into each target",
                tree.root,
                st.files,
                st.bytes as f64 / (1024.0 * 1024.0),
                st.dirs,
                st.symlinks,
                st.skipped
            );
        }
        out
    }

    /// The results table plus notes (syscall index, how to read it).
    pub fn table(&self) -> String {
        let subject = self.targets.first().map(|t| t.name.as_str());
        let mut head = vec!["workload".to_owned(), "unit".to_owned(), "thr".to_owned()];
        for t in &self.targets {
            head.push(format!("{} median", t.name));
            head.push("[min-max]".to_owned());
            head.push("scaling".to_owned());
        }
        let peers: Vec<&str> = self
            .targets
            .iter()
            .skip(1)
            .map(|t| t.name.as_str())
            .collect();
        for p in &peers {
            head.push(format!("{}/{p}", subject.unwrap_or("?")));
        }
        let mut rows = vec![head];
        let mut last_workload = None;
        for (workload, threads) in self.keys() {
            let mut row = vec![
                if last_workload == Some(workload) {
                    String::new()
                } else {
                    workload.name().to_owned()
                },
                workload.unit().to_owned(),
                threads.to_string(),
            ];
            last_workload = Some(workload);
            for t in &self.targets {
                match self.find(&t.name, workload, threads) {
                    Some(r) => {
                        row.push(si(r.median));
                        row.push(format!("[{}-{}]", si(r.min), si(r.max)));
                        row.push(r.scaling.map_or("-".to_owned(), |x| format!("{x:.2}x")));
                    }
                    None => row.extend(["-".to_owned(), String::new(), String::new()]),
                }
            }
            for p in &peers {
                let ratio = self
                    .ratios
                    .iter()
                    .find(|r| r.workload == workload && r.threads == threads && r.peer == *p);
                row.push(ratio.map_or("-".to_owned(), |r| format!("{:.2}x", r.ratio)));
            }
            rows.push(row);
        }
        let mut out = render(&rows);
        let index_lines: Vec<String> = self
            .targets
            .iter()
            .filter_map(|t| {
                let parts: Vec<String> = self
                    .results
                    .iter()
                    .filter(|r| r.series.target == t.name)
                    .filter_map(|r| r.index.map(|i| format!("{}t {i:.1}", r.series.threads)))
                    .collect();
                (!parts.is_empty()).then(|| format!("{} {}", t.name, parts.join(", ")))
            })
            .collect();
        if !index_lines.is_empty() {
            let _ = writeln!(
                out,
                "\nsyscall UnixBench index (lps / {SYSCALL_INDEX_BASELINE} x 10): {}",
                index_lines.join("; ")
            );
        }
        let _ = writeln!(
            out,
            "\nmedian ops/s over {} reps [min-max]; scaling = N-thread median / 1-thread median; {}",
            self.settings.reps,
            match (subject, peers.is_empty()) {
                (Some(s), false) => format!(
                    "{} = ratio of medians in this run",
                    peers
                        .iter()
                        .map(|p| format!("{s}/{p}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                _ => "no peer to compare".to_owned(),
            }
        );
        let _ = writeln!(
            out,
            "note: {} cores on a shared machine: absolute rates are noisy; the ratios, measured \
             interleaved in the same run, are what to compare.",
            self.machine.cores
        );
        out
    }

    /// The distinct (workload, threads) pairs, in run order.
    fn keys(&self) -> Vec<(WorkloadKind, usize)> {
        let mut keys: Vec<(WorkloadKind, usize)> = Vec::new();
        for r in &self.results {
            let k = (r.series.workload, r.series.threads);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        keys
    }

    /// The result for one target, workload and thread count.
    fn find(&self, target: &str, workload: WorkloadKind, threads: usize) -> Option<&SeriesReport> {
        self.results.iter().find(|r| {
            r.series.target == target
                && r.series.workload == workload
                && r.series.threads == threads
        })
    }
}

/// `x` with three significant digits and an SI suffix: `1.23M`, `987k`,
/// `12.3`.
pub fn si(x: f64) -> String {
    let (v, suffix) = if x >= 1e9 {
        (x / 1e9, "G")
    } else if x >= 1e6 {
        (x / 1e6, "M")
    } else if x >= 1e3 {
        (x / 1e3, "k")
    } else {
        (x, "")
    };
    if v >= 100.0 {
        format!("{v:.0}{suffix}")
    } else if v >= 10.0 {
        format!("{v:.1}{suffix}")
    } else {
        format!("{v:.2}{suffix}")
    }
}

/// Joins `items` with `sep`.
fn join(items: impl Iterator<Item = String>, sep: &str) -> String {
    items.collect::<Vec<_>>().join(sep)
}

/// Renders rows as aligned columns: the first two left-aligned, the rest
/// right-aligned, two spaces apart.
pub(crate) fn render(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            let pad = widths[c].saturating_sub(cell.chars().count());
            if c < 2 {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            } else {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(target: &str, threads: usize, reps: &[f64]) -> Series {
        Series {
            target: target.to_owned(),
            workload: WorkloadKind::Syscall,
            unit: "lps",
            threads,
            warmup: 1.0,
            reps: reps.to_vec(),
        }
    }

    #[test]
    fn si_formats() {
        assert_eq!(si(1234.0), "1.23k");
        assert_eq!(si(12_345_678.0), "12.3M");
        assert_eq!(si(987_000.0), "987k");
        assert_eq!(si(5.0), "5.00");
    }

    #[test]
    fn report_computes_scaling_ratios_and_index() {
        let targets = vec![
            TargetInfo {
                name: "uvfs".into(),
                description: "u".into(),
            },
            TargetInfo {
                name: "kernel".into(),
                description: "k".into(),
            },
        ];
        let r = Report::new(
            Machine {
                cores: 2,
                cpu: String::new(),
                kernel: String::new(),
            },
            Settings {
                workloads: vec![WorkloadKind::Syscall],
                threads: vec![1, 2],
                reps: 3,
                duration_s: 1.0,
                warmup_s: 0.25,
            },
            targets,
            None,
            vec![
                series("uvfs", 1, &[100.0, 300.0, 200.0]),
                series("kernel", 1, &[10.0, 10.0, 10.0]),
                series("uvfs", 2, &[400.0, 400.0, 400.0]),
                series("kernel", 2, &[20.0, 20.0, 20.0]),
            ],
        );
        let u2 = &r.results[2];
        assert_eq!(u2.scaling, Some(2.0));
        assert_eq!(r.results[0].index, Some(200.0 / 15000.0 * 10.0));
        assert_eq!(r.ratios.len(), 2);
        assert_eq!(r.ratios[0].ratio, 20.0);
        let table = r.table();
        assert!(table.contains("uvfs/kernel"), "{table}");
        assert!(table.contains("20.00x"), "{table}");
        serde_json::to_string(&r).unwrap();
    }

    /// A target that skipped a workload (see `Target::supports`) has no
    /// series for it: its cells and the ratio show `-`, no ratio is
    /// computed, and the JSON holds only what ran.
    #[test]
    fn report_handles_a_target_missing_for_a_workload() {
        let targets = vec![
            TargetInfo {
                name: "uvfs".into(),
                description: "u".into(),
            },
            TargetInfo {
                name: "kernel".into(),
                description: "k".into(),
            },
        ];
        let with = |mut s: Series, workload: WorkloadKind| {
            s.workload = workload;
            s.unit = workload.unit();
            s
        };
        let r = Report::new(
            Machine {
                cores: 2,
                cpu: String::new(),
                kernel: String::new(),
            },
            Settings {
                workloads: vec![WorkloadKind::ReadShared, WorkloadKind::OpenClose],
                threads: vec![1],
                reps: 3,
                duration_s: 1.0,
                warmup_s: 0.25,
            },
            targets,
            None,
            vec![
                with(series("kernel", 1, &[10.0; 3]), WorkloadKind::ReadShared),
                with(series("uvfs", 1, &[30.0; 3]), WorkloadKind::OpenClose),
                with(series("kernel", 1, &[10.0; 3]), WorkloadKind::OpenClose),
            ],
        );
        assert_eq!(r.ratios.len(), 1);
        assert_eq!(r.ratios[0].workload, WorkloadKind::OpenClose);
        assert_eq!(r.ratios[0].ratio, 3.0);
        let table = r.table();
        let row = |name: &str| {
            table
                .lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("no {name} row in {table}"))
                .split_whitespace()
                .collect::<Vec<_>>()
        };
        let read = row("read-shared");
        assert_eq!(read[1], "reads/s", "{table}");
        assert_eq!(read[3], "-", "uvfs missing: {table}");
        assert_eq!(read.last(), Some(&"-"), "no ratio: {table}");
        assert_eq!(row("open-close").last(), Some(&"3.00x"), "{table}");
        let json: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(json["results"].as_array().unwrap().len(), 3);
        assert_eq!(json["results"][0]["workload"], "read-shared");
        assert_eq!(json["ratios"].as_array().unwrap().len(), 1);
    }
}

/// One row of the ablation table (ablation.rs; also in `--json` under `ablation`). Here,
/// with the report that carries it, so that report.rs does not import ablation.rs.
#[derive(Debug, Clone, Serialize)]
pub struct AblationRow {
    /// Lesson id (`"1"`, `"4a"`, ...).
    pub lesson: String,
    /// What changed.
    pub title: String,
    /// The workload (always `Some` today; kept optional in the JSON schema).
    pub workload: Option<WorkloadKind>,
    /// Threads.
    pub threads: usize,
    /// "Before" target.
    pub before: String,
    /// "After" target.
    pub after: String,
    /// Median ops/s of "before" (unit of the workload).
    pub before_median: f64,
    /// Median ops/s of "after".
    pub after_median: f64,
    /// Median over repetitions of after/before, each pair from the same repetition.
    pub ratio_median: f64,
    /// Smallest per-repetition ratio.
    pub ratio_min: f64,
    /// Largest per-repetition ratio.
    pub ratio_max: f64,
    /// Before/after pairs the ratios come from (one per repetition).
    pub pairs: usize,
    /// The patch's reported figure.
    pub patch: String,
}

impl AblationRow {
    /// `"faster"` / `"slower"` when "after" was so by more than [`MARGIN`] in every pair,
    /// else `"noise"` (also with fewer than [`MIN_PAIRS`] pairs). With 5 pairs and no real effect, "all pairs on one side" alone would
    /// happen 2 times in 32 per row; the margin keeps a small drift of this noisy machine
    /// from being read as an effect.
    pub fn verdict(&self) -> &'static str {
        if self.pairs < MIN_PAIRS {
            "noise"
        } else if self.ratio_min > 1.0 + MARGIN {
            "faster"
        } else if self.ratio_max < 1.0 - MARGIN {
            "slower"
        } else {
            "noise"
        }
    }
}

/// Relative difference every pair must show for a verdict other than "noise" (2%).
pub const MARGIN: f64 = 0.02;

/// Fewest pairs (repetitions) for a verdict other than "noise": one or two pairs agree by
/// chance too often.
pub const MIN_PAIRS: usize = 3;
