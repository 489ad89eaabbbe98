//! The `--json` report's plots: one SVG per workload, written next to the
//! JSON file, showing how each target's rate scales with threads.
//!
//! Each plot has the thread counts on x (a tick at each measured count) and
//! the median rate of each repetition set on y, in the workload's unit,
//! from 0. Every target that ran the workload is one line with a marker per
//! thread count and a bar from its slowest to its fastest repetition; a
//! target that skipped the workload has no line. A legend names the targets.
//!
//! The plots are drawn with `plotters`' SVG backend only (no font files: the
//! viewer lays the text out), into a string first, so a drawing error never
//! leaves a half-written file.

use std::ops::Range;
use std::path::{Path, PathBuf};

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::error::{Context as _, Error, Result};
use crate::report::{si, Report, SeriesReport};
use crate::workloads::WorkloadKind;

/// Size of each plot, in pixels (width, height).
const SIZE: (u32, u32) = (900, 560);

/// Line colours, one per target in report order, cycling: Tableau 10, told
/// apart on white and by most colour-blind readers.
const COLORS: [RGBColor; 10] = [
    RGBColor(0x4E, 0x79, 0xA7),
    RGBColor(0xF2, 0x8E, 0x2B),
    RGBColor(0xE1, 0x57, 0x59),
    RGBColor(0x76, 0xB7, 0xB2),
    RGBColor(0x59, 0xA1, 0x4F),
    RGBColor(0xED, 0xC9, 0x48),
    RGBColor(0xB0, 0x7A, 0xA1),
    RGBColor(0xFF, 0x9D, 0xA7),
    RGBColor(0x9C, 0x75, 0x5F),
    RGBColor(0xBA, 0xB0, 0xAC),
];

/// Height of the plotting area inside [`SIZE`] (less the caption, margins
/// and x labels), in pixels, roughly.
const PLOT_HEIGHT_PX: f64 = 450.0;

/// Height of one legend row, in pixels, roughly (17 px labels).
const LEGEND_ROW_PX: f64 = 22.0;

/// The legend's distance from the plot's top plus its box's own padding, in
/// pixels, roughly.
const LEGEND_PAD_PX: f64 = 24.0;

/// Writes one SVG plot per workload in `report` next to `json_path`, named
/// `<json file stem>-<workload>.svg` (`out/r.json` → `out/r-syscall.svg`),
/// replacing any file of that name. Workloads appear in run order; one that
/// no target ran gets no plot.
///
/// Returns the paths written, in that order.
///
/// # Errors
///
/// A plot cannot be drawn, or its file cannot be written; the plots written
/// before it stay.
pub fn write_svgs(report: &Report, json_path: &Path) -> Result<Vec<PathBuf>> {
    let dir = json_path.parent().unwrap_or(Path::new(""));
    let stem = json_path
        .file_stem()
        .ok_or_else(|| Error::msg(format!("--json: {} has no file name", json_path.display())))?
        .to_string_lossy();
    let targets = target_names(report);
    let mut written = Vec::new();
    for workload in workloads(report) {
        let path = dir.join(format!("{stem}-{}.svg", workload.name()));
        let svg = render(report, &targets, workload)
            .with_context(|| format!("--json: drawing {}", path.display()))?;
        std::fs::write(&path, svg)
            .with_context(|| format!("--json: writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// The workloads with at least one result, in run order.
fn workloads(report: &Report) -> Vec<WorkloadKind> {
    let mut out = Vec::new();
    for r in &report.results {
        if !out.contains(&r.series.workload) {
            out.push(r.series.workload);
        }
    }
    out
}

/// The target names: the report's targets in order, then any other target a
/// result names (so a line's colour is the same in every plot).
fn target_names(report: &Report) -> Vec<&str> {
    let mut out: Vec<&str> = report.targets.iter().map(|t| t.name.as_str()).collect();
    for r in &report.results {
        if !out.contains(&r.series.target.as_str()) {
            out.push(&r.series.target);
        }
    }
    out
}

/// The x axis: linear in threads, with ticks (and grid lines) only at the
/// measured thread counts.
///
/// `plotters`' own `with_key_points` does the same but, on an `f64` range,
/// loses the label formatting `configure_mesh` needs.
struct ThreadAxis {
    /// The mapping from threads to pixels.
    linear: RangedCoordf64,
    /// The measured thread counts.
    ticks: Vec<f64>,
}

impl Ranged for ThreadAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.linear.map(value, limit)
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        // Bold points (ticks, labels, grid) only; no light grid between them.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.linear.range()
    }
}

/// Draws the plot of `workload` and returns it as an SVG document.
///
/// # Errors
///
/// `plotters` failed to lay out or draw an element.
fn render(
    report: &Report,
    targets: &[&str],
    workload: WorkloadKind,
) -> std::result::Result<String, DrawingAreaErrorKind<std::io::Error>> {
    let results: Vec<&SeriesReport> = report
        .results
        .iter()
        .filter(|r| r.series.workload == workload)
        .collect();
    let mut threads: Vec<usize> = results.iter().map(|r| r.series.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    let unit = results.first().map_or(workload.unit(), |r| r.series.unit);

    // x: the measured thread counts, padded so end markers clear the axes
    // (and one thread count still spans a range).
    let lo = threads.first().copied().unwrap_or(1) as f64;
    let hi = threads.last().copied().unwrap_or(1) as f64;
    let pad = ((hi - lo) * 0.05).max(0.5);
    // y: from 0 to above the fastest repetition, leaving the legend (upper
    // left, one row per line drawn) a band of its own above the data.
    let lines = targets
        .iter()
        .filter(|&&t| results.iter().any(|r| r.series.target == t))
        .count();
    let legend = ((LEGEND_PAD_PX + LEGEND_ROW_PX * lines as f64) / PLOT_HEIGHT_PX).min(0.5);
    let top = results.iter().map(|r| r.max).fold(0.0, f64::max);
    let top = if top.is_finite() && top > 0.0 {
        top / (1.0 - legend)
    } else {
        1.0
    };

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "{}: ops/s vs threads (median, min–max bars)",
                    workload.name()
                ),
                ("sans-serif", 26),
            )
            .margin(16)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(
                ThreadAxis {
                    linear: ((lo - pad)..(hi + pad)).into(),
                    ticks: threads.iter().map(|&t| t as f64).collect(),
                },
                0.0..top,
            )?;
        chart
            .configure_mesh()
            .x_desc("threads")
            .y_desc(unit)
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 17))
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|&y| if y == 0.0 { "0".to_owned() } else { si(y) })
            .draw()?;

        for (i, &target) in targets.iter().enumerate() {
            let mut points: Vec<&SeriesReport> = results
                .iter()
                .copied()
                .filter(|r| r.series.target == target)
                .collect();
            if points.is_empty() {
                continue;
            }
            points.sort_by_key(|r| r.series.threads);
            let color = COLORS[i % COLORS.len()];
            let xy = |r: &SeriesReport, y: f64| (r.series.threads as f64, y);
            // Min–max bars first, under the line and markers: a vertical
            // line with a short cap at each end (the caps are pixel offsets
            // from their data point).
            let bar = color.stroke_width(1);
            chart.draw_series(
                points
                    .iter()
                    .map(|r| PathElement::new(vec![xy(r, r.min), xy(r, r.max)], bar)),
            )?;
            chart.draw_series(points.iter().flat_map(|r| {
                [r.min, r.max].map(|y| {
                    EmptyElement::at(xy(r, y)) + PathElement::new(vec![(-6, 0), (6, 0)], bar)
                })
            }))?;
            chart
                .draw_series(LineSeries::new(
                    points.iter().map(|r| xy(r, r.median)),
                    color.stroke_width(2),
                ))?
                .label(target)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart.draw_series(
                points
                    .iter()
                    .map(|r| Circle::new(xy(r, r.median), 4, color.filled())),
            )?;
        }

        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 17))
            .draw()?;
        root.present()?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::Series;
    use crate::report::{Machine, Settings, TargetInfo};

    /// One series of `workload` with the given repetitions.
    fn series(target: &str, workload: WorkloadKind, threads: usize, reps: &[f64]) -> Series {
        Series {
            target: target.to_owned(),
            workload,
            unit: workload.unit(),
            threads,
            warmup: 1.0,
            reps: reps.to_vec(),
        }
    }

    /// Two targets × two thread counts for `syscall`; `read-shared` with one
    /// thread count and the first target skipped (no line, still a plot).
    #[test]
    fn writes_one_svg_per_workload_next_to_the_json() {
        let targets = ["uvfs[cas-loop-get]", "kernel"].map(|name| TargetInfo {
            name: name.into(),
            description: String::new(),
        });
        let report = Report::new(
            Machine {
                cores: 2,
                cpu: String::new(),
                kernel: String::new(),
            },
            Settings {
                workloads: vec![WorkloadKind::Syscall, WorkloadKind::ReadShared],
                threads: vec![1, 2],
                reps: 3,
                duration_s: 1.0,
                warmup_s: 0.25,
            },
            targets.to_vec(),
            None,
            vec![
                series(
                    "uvfs[cas-loop-get]",
                    WorkloadKind::Syscall,
                    1,
                    &[1e6, 1.2e6, 0.9e6],
                ),
                series("kernel", WorkloadKind::Syscall, 1, &[5e5, 6e5, 5.5e5]),
                series(
                    "uvfs[cas-loop-get]",
                    WorkloadKind::Syscall,
                    2,
                    &[2e6, 2.1e6, 1.9e6],
                ),
                series("kernel", WorkloadKind::Syscall, 2, &[1e6, 1.1e6, 0.9e6]),
                series("kernel", WorkloadKind::ReadShared, 1, &[3e5, 3e5, 3e5]),
            ],
        );
        let dir = tempfile::tempdir().unwrap();
        let paths = write_svgs(&report, &dir.path().join("r.json")).unwrap();
        assert_eq!(
            paths,
            [
                dir.path().join("r-syscall.svg"),
                dir.path().join("r-read-shared.svg")
            ]
        );
        let on_disk = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(on_disk, 2, "one plot per workload, nothing else");

        let read = |p: &PathBuf| std::fs::read_to_string(p).unwrap();
        let syscall = read(&paths[0]);
        assert!(
            syscall.starts_with("<svg") || syscall.starts_with("<?xml"),
            "{syscall}"
        );
        assert!(syscall.trim_end().ends_with("</svg>"), "{syscall}");
        for name in ["uvfs[cas-loop-get]", "kernel", "syscall", "lps", "threads"] {
            assert!(syscall.contains(name), "{name} missing: {syscall}");
        }
        let read_shared = read(&paths[1]);
        assert!(read_shared.contains("read-shared"), "{read_shared}");
        assert!(read_shared.contains("reads/s"), "{read_shared}");
        assert!(read_shared.contains("kernel"), "{read_shared}");
        assert!(
            !read_shared.contains("uvfs[cas-loop-get]"),
            "a target that skipped the workload has no line: {read_shared}"
        );

        // A plot that cannot be written is an error naming it.
        std::fs::remove_file(&paths[0]).unwrap();
        std::fs::create_dir(&paths[0]).unwrap();
        let e = write_svgs(&report, &dir.path().join("r.json"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--json: writing "), "{e}");
        assert!(e.contains("r-syscall.svg"), "{e}");
    }
}
