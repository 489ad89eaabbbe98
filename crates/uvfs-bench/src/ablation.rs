//! `uvfs bench --ablation`: each lesson's "before" variant against uvfs, on the product's own
//! code paths (`uvfs::variant`), interleaved in one run, with the seed patch's own figure
//! beside ours.
//!
//! Every variant is a [`UvfsTarget`] of its own type, restricted to the workloads that isolate
//! its lesson; uvfs, the kernel (and the peer crates, when built with `--features peers`) run
//! every ablation workload. The harness interleaves all targets within each repetition
//! (A B A B ...), so each repetition gives one before/after pair measured seconds apart; a
//! lesson's row reports the median of the per-pair ratios and their min–max.

use std::fmt::Write as _;

use crate::error::Result;
use crate::fuse_client;
use crate::harness::{median, Series};
use crate::report::{render, si, Report};
pub use crate::report::{AblationRow, MARGIN, MIN_PAIRS};
use crate::target::{Target, Worker};
use crate::uvfs_target::UvfsTarget;
use crate::workloads::{Workload, WorkloadKind};
use uvfs::variant::{
    AlignedFileListVariant, BlindSetVariant, CasRefVariant, CountedFgetVariant,
    GlobalFileListVariant, SharedLineVariant, Variant,
};

/// The workloads `--ablation` runs by default, in order.
pub const WORKLOADS: [WorkloadKind; 5] = [
    WorkloadKind::FstatShared,
    WorkloadKind::ReadShared,
    WorkloadKind::OpenClose,
    WorkloadKind::CreatClo,
    WorkloadKind::Futimes,
];

/// Repetitions `--ablation` makes unless `--reps` says otherwise (the issue asks for at
/// least 5 before/after pairs).
pub const DEFAULT_REPS: u32 = 5;

/// Seconds per measured run unless `--duration` says otherwise.
pub const DEFAULT_DURATION_S: f64 = 1.0;

/// One lesson's comparison: which target is "before", which "after", on which workloads.
#[derive(Debug, Clone, Copy)]
pub struct Lesson {
    /// `1` .. `5`, with a letter when one patch has two steps.
    pub id: &'static str,
    /// What changed, in a few words.
    pub title: &'static str,
    /// The "before" target's name.
    pub before: &'static str,
    /// The "after" target's name.
    pub after: &'static str,
    /// The workloads that isolate it.
    pub workloads: &'static [WorkloadKind],
    /// The patch's own reported figure, for context.
    pub patch: &'static str,
}

const SHARED_FD: &[WorkloadKind] = &[WorkloadKind::FstatShared, WorkloadKind::ReadShared];
const OPEN_PATH: &[WorkloadKind] = &[WorkloadKind::OpenClose, WorkloadKind::CreatClo];

/// The lessons, as measured here. Lessons 1 and 2 are about the counted `fget` (Linux's), so
/// their "after" is uvfs with it (`uvfs[counted-fget]`); row 2+ is uvfs's own step past it.
pub const LESSONS: [Lesson; 7] = [
    Lesson {
        id: "1",
        title: "f_count off f_mode's line",
        before: "uvfs[count-on-mode-line]",
        after: "uvfs[counted-fget]",
        workloads: SHARED_FD,
        patch: "+42% UnixBench syscall, 24 copies, Kunpeng 920; +17% Intel 6248",
    },
    Lesson {
        id: "2",
        title: "fget by one atomic add",
        before: "uvfs[cas-loop-get]",
        after: "uvfs[counted-fget]",
        workloads: SHARED_FD,
        patch: "+132% UnixBench syscall, Kunpeng 920 (with patch 1)",
    },
    Lesson {
        id: "2+",
        title: "fdget borrows: no shared write (uvfs, not Linux)",
        before: "uvfs[counted-fget]",
        after: "uvfs",
        workloads: SHARED_FD,
        patch: "(no Linux patch: Linux's fget always writes f_count)",
    },
    Lesson {
        id: "3",
        title: "test before set (stat's ctime mark)",
        before: "uvfs[blind-set-bit]",
        after: "uvfs",
        workloads: &[WorkloadKind::FstatShared],
        patch: "+3.3% AIM7 creat-clo, 2-socket Broadwell",
    },
    Lesson {
        id: "4a",
        title: "files_lock cache-line aligned",
        before: "uvfs[files-lock-unaligned]",
        after: "uvfs[files-lock-aligned]",
        workloads: OPEN_PATH,
        patch: "-5% system time, kernbench -j16x",
    },
    Lesson {
        id: "4b",
        title: "no global file list at all",
        before: "uvfs[files-lock-aligned]",
        after: "uvfs",
        workloads: OPEN_PATH,
        patch: "(lists removed in Linux 3.13; no figure)",
    },
    Lesson {
        id: "5",
        title: "FUSE request_end skips the queue lock",
        before: "uvfs-fuse-client[locked-end]",
        after: "uvfs-fuse-client",
        workloads: &[WorkloadKind::Futimes],
        patch: "request_end share of do_write 62.6% -> 58.2%",
    },
];

/// A target restricted to some workloads (a variant runs only where its lesson shows).
struct Restricted {
    inner: Box<dyn Target>,
    kinds: Vec<WorkloadKind>,
}

impl std::fmt::Debug for Restricted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Restricted")
            .field("target", &self.inner.name())
            .field("kinds", &self.kinds)
            .finish()
    }
}

impl Target for Restricted {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> String {
        let kinds: Vec<&str> = self.kinds.iter().map(|k| k.name()).collect();
        format!("{} (runs: {})", self.inner.description(), kinds.join(", "))
    }
    fn supports(&self, kind: WorkloadKind) -> bool {
        self.kinds.contains(&kind) && self.inner.supports(kind)
    }
    fn setup(&mut self, workload: &Workload, threads: usize) -> Result<Vec<Box<dyn Worker + '_>>> {
        self.inner.setup(workload, threads)
    }
    fn teardown(&mut self) -> Result<()> {
        self.inner.teardown()
    }
    fn close(self: Box<Self>) -> Result<()> {
        self.inner.close()
    }
}

/// A variant's target, restricted to the workloads of the lessons it is "before" or "after"
/// of (except uvfs itself).
fn variant<V: Variant>() -> Result<Box<dyn Target>> {
    let inner: Box<dyn Target> = Box::new(UvfsTarget::<V>::new_variant()?);
    let name = inner.name().to_owned();
    let mut kinds = Vec::new();
    for l in LESSONS
        .iter()
        .filter(|l| l.before == name || l.after == name)
    {
        for k in l.workloads {
            if !kinds.contains(k) {
                kinds.push(*k);
            }
        }
    }
    Ok(Box::new(Restricted { inner, kinds }))
}

/// Lesson 5's two targets, uvfs's FUSE client on an in-process server
/// (`fuse_client::in_process`) ending requests each way, restricted to lesson 5's
/// workloads; `threads` server threads.
fn fuse_targets(threads: usize) -> Result<Vec<Box<dyn Target>>> {
    let l5 = LESSONS
        .iter()
        .find(|l| l.id == "5")
        .map_or(&[][..], |l| l.workloads);
    let mut out: Vec<Box<dyn Target>> = Vec::new();
    for end in [
        uvfs::fuse::client::RequestEnd::Locked,
        uvfs::fuse::client::RequestEnd::Sticky,
    ] {
        out.push(Box::new(Restricted {
            inner: fuse_client::in_process(end, threads)?,
            kinds: l5.to_vec(),
        }));
    }
    Ok(out)
}

/// The variant targets, every lesson's "before" (and 4a's and 5's "after"); lesson 5's
/// in-process FUSE server gets `threads` threads (the most any run uses).
///
/// # Errors
///
/// A target's setup (`mkdir /bench`; for lesson 5, the in-process server and its mount)
/// failed.
pub fn variant_targets(threads: usize) -> Result<Vec<Box<dyn Target>>> {
    let mut v = vec![
        variant::<CountedFgetVariant>()?,
        variant::<SharedLineVariant>()?,
        variant::<CasRefVariant>()?,
        variant::<BlindSetVariant>()?,
        variant::<GlobalFileListVariant>()?,
        variant::<AlignedFileListVariant>()?,
    ];
    v.extend(fuse_targets(threads)?);
    Ok(v)
}

/// The ablation rows from a run's series: for each lesson, workload and thread count where
/// both targets ran, the per-repetition ratios after/before.
pub fn rows(series: &[Series], threads: &[usize]) -> Vec<AblationRow> {
    let find = |target: &str, w: WorkloadKind, t: usize| {
        series
            .iter()
            .find(|s| s.target == target && s.workload == w && s.threads == t)
    };
    let mut out = Vec::new();
    for l in &LESSONS {
        let before = l.before;
        for &w in l.workloads {
            for &t in threads {
                let (Some(b), Some(a)) = (find(before, w, t), find(l.after, w, t)) else {
                    continue;
                };
                let ratios: Vec<f64> = a
                    .reps
                    .iter()
                    .zip(&b.reps)
                    .filter(|(_, &b)| b > 0.0)
                    .map(|(a, b)| a / b)
                    .collect();
                if ratios.is_empty() {
                    continue;
                }
                out.push(AblationRow {
                    lesson: l.id.to_owned(),
                    title: l.title.to_owned(),
                    workload: Some(w),
                    threads: t,
                    before: before.to_owned(),
                    after: l.after.to_owned(),
                    before_median: b.median(),
                    after_median: a.median(),
                    ratio_median: median(&ratios),
                    ratio_min: ratios.iter().copied().fold(f64::INFINITY, f64::min),
                    ratio_max: ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    pairs: ratios.len(),
                    patch: l.patch.to_owned(),
                });
            }
        }
    }
    out
}

/// The ablation table, then every target's medians per workload, then how to read them.
pub fn table(report: &Report) -> String {
    let mut rows = vec![[
        "lesson",
        "workload",
        "thr",
        "before",
        "after",
        "after/before",
        "[min-max]",
        "verdict",
        "patch's figure",
    ]
    .map(str::to_owned)
    .to_vec()];
    for r in &report.ablation {
        rows.push(vec![
            format!("{} {}", r.lesson, r.title),
            r.workload.map_or("-", |w| w.name()).to_owned(),
            r.threads.to_string(),
            si(r.before_median),
            si(r.after_median),
            format!("{:.2}x", r.ratio_median),
            format!("[{:.2}-{:.2}]", r.ratio_min, r.ratio_max),
            r.verdict().to_owned(),
            r.patch.clone(),
        ]);
    }
    // The patch's figure once per lesson.
    for i in (2..rows.len()).rev() {
        if rows[i][0] == rows[i - 1][0] {
            rows[i][8].clear();
        }
    }
    let mut out = render(&rows);
    let _ = writeln!(
        out,
        "\nbefore/after: median ops/s of the lesson's variant and of what replaced it; \
         after/before: median of the {} per-repetition ratios (each pair measured in the same \
         repetition, interleaved), [min-max] of those ratios; verdict: faster/slower when \
         after/before > 1.02 / < 0.98 in every pair (at least 3 pairs), else noise.",
        report.settings.reps
    );
    out.push_str("\nall targets, median ops/s [min-max]:\n");
    let mut all = vec![vec!["workload".to_owned(), "target".to_owned()]];
    for t in &report.settings.threads {
        all[0].push(format!("{t} thr"));
        all[0].push("[min-max]".to_owned());
    }
    for w in &report.settings.workloads {
        let mut first = true;
        for target in &report.targets {
            let cells: Vec<Option<&crate::report::SeriesReport>> = report
                .settings
                .threads
                .iter()
                .map(|&t| {
                    report.results.iter().find(|r| {
                        r.series.target == target.name
                            && r.series.workload == *w
                            && r.series.threads == t
                    })
                })
                .collect();
            if cells.iter().all(Option::is_none) {
                continue;
            }
            let mut row = vec![
                if first {
                    format!("{} ({})", w.name(), w.unit())
                } else {
                    String::new()
                },
                target.name.clone(),
            ];
            first = false;
            for c in cells {
                match c {
                    Some(r) => {
                        row.push(si(r.median));
                        row.push(format!("[{}-{}]", si(r.min), si(r.max)));
                    }
                    None => row.extend(["-".to_owned(), String::new()]),
                }
            }
            all.push(row);
        }
    }
    out.push_str(&render(&all));
    let _ = writeln!(
        out,
        "\nnote: {} cores on a shared machine show only the start of the curves (the patches \
         measured 16-128 cores); absolute rates are noisy, read the ratios.",
        report.machine.cores
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(target: &str, w: WorkloadKind, threads: usize, reps: &[f64]) -> Series {
        Series {
            target: target.to_owned(),
            workload: w,
            unit: w.unit(),
            threads,
            warmup: 0.0,
            reps: reps.to_vec(),
        }
    }

    #[test]
    fn ratios_are_per_repetition_pairs() {
        let s = vec![
            series(
                "uvfs[counted-fget]",
                WorkloadKind::FstatShared,
                1,
                &[10.0, 20.0, 30.0],
            ),
            series(
                "uvfs[cas-loop-get]",
                WorkloadKind::FstatShared,
                1,
                &[5.0, 20.0, 60.0],
            ),
        ];
        let rows = rows(&s, &[1, 2]);
        let r = rows
            .iter()
            .find(|r| r.lesson == "2" && r.workload == Some(WorkloadKind::FstatShared))
            .unwrap();
        // Pairs: 10/5 = 2, 20/20 = 1, 30/60 = 0.5 (not the ratio of medians, 20/20).
        assert_eq!(r.ratio_median, 1.0);
        assert_eq!(r.ratio_min, 0.5);
        assert_eq!(r.ratio_max, 2.0);
        assert_eq!(r.verdict(), "noise");
        assert_eq!(r.before_median, 20.0);
        // No row where a side is missing (2 threads, read-shared, other lessons).
        assert!(rows.iter().all(|r| r.lesson == "2"));
        assert_eq!(rows.len(), 1);
    }

    #[test]
    fn verdict_needs_every_pair() {
        let s = vec![
            series(
                "uvfs[files-lock-aligned]",
                WorkloadKind::OpenClose,
                2,
                &[3.0, 4.0, 3.5],
            ),
            series(
                "uvfs[files-lock-unaligned]",
                WorkloadKind::OpenClose,
                2,
                &[2.0, 2.0, 2.0],
            ),
            series("uvfs", WorkloadKind::OpenClose, 2, &[3.05, 4.0, 3.5]),
        ];
        let r = rows(&s, &[2]);
        let a = r.iter().find(|r| r.lesson == "4a").unwrap();
        assert_eq!(a.verdict(), "faster");
        assert_eq!(a.ratio_median, 1.75);
        assert_eq!(a.pairs, 3);
        // 4b, uvfs over aligned: pairs +1.7% and 0%: within the margin.
        let b = r.iter().find(|r| r.lesson == "4b").unwrap();
        assert_eq!(b.verdict(), "noise");
        // Two pairs are too few for a verdict, however far apart.
        let two = vec![
            series(
                "uvfs[blind-set-bit]",
                WorkloadKind::FstatShared,
                1,
                &[1.0, 1.0],
            ),
            series("uvfs", WorkloadKind::FstatShared, 1, &[2.0, 2.0]),
        ];
        let r = rows(&two, &[1]);
        let r = r.iter().find(|r| r.lesson == "3").unwrap();
        assert_eq!((r.ratio_min, r.verdict()), (2.0, "noise"));
        // Lesson 5: the FUSE client ending requests under the lock, then without it.
        let l5 = vec![
            series(
                "uvfs-fuse-client[locked-end]",
                WorkloadKind::Futimes,
                1,
                &[1.0, 1.0, 1.0],
            ),
            series(
                "uvfs-fuse-client",
                WorkloadKind::Futimes,
                1,
                &[1.1, 1.2, 1.05],
            ),
        ];
        let r = rows(&l5, &[1]);
        let r = r.iter().find(|r| r.lesson == "5").unwrap();
        assert_eq!((r.pairs, r.verdict()), (3, "faster"));
    }

    #[test]
    fn variant_targets_are_restricted_to_their_lessons() {
        let ts = variant_targets(1).unwrap();
        let names: Vec<&str> = ts.iter().map(|t| t.name()).collect();
        for l in LESSONS.iter() {
            assert!(
                names.contains(&l.before),
                "{} missing from {names:?}",
                l.before
            );
        }
        let locked = ts
            .iter()
            .find(|t| t.name() == "uvfs-fuse-client[locked-end]")
            .unwrap();
        assert!(locked.supports(WorkloadKind::Futimes));
        assert!(!locked.supports(WorkloadKind::FstatShared));
        let cas = ts
            .iter()
            .find(|t| t.name() == "uvfs[cas-loop-get]")
            .unwrap();
        assert!(cas.supports(WorkloadKind::FstatShared));
        assert!(!cas.supports(WorkloadKind::OpenClose));
        let aligned = ts
            .iter()
            .find(|t| t.name() == "uvfs[files-lock-aligned]")
            .unwrap();
        assert!(aligned.supports(WorkloadKind::OpenClose));
        assert!(!aligned.supports(WorkloadKind::FstatShared));
        for t in ts {
            t.close().unwrap();
        }
    }
}
