//! The cluster bench's SVG charts, written beside its JSON (benches/README.md, "Charts"): a
//! latency CDF per scenario and pass ([`cdf`]), throughput against concurrency from `sweep`
//! ([`throughput`]), and the contended scenarios' sections/s against 1 / section
//! ([`ceiling`]). This module picks what each chart shows from the report and names the
//! files; the submodules draw from plain numbers. Nothing here measures.

mod cdf;
mod ceiling;
mod svg;
mod throughput;

use std::path::{Path, PathBuf};

use plotters::style::RGBColor;

use crate::format::micros;
use crate::kinds::KindsReport;
use crate::report::{Machine, Row};
use crate::scenario::SweepPoint;
use crate::stats::Summary;

use self::ceiling::{Bar, Panel};

/// What the charts are drawn from: the report's parts.
pub(crate) struct Report<'a> {
    pub(crate) rows: &'a [Row],
    pub(crate) kinds: Option<&'a KindsReport>,
    pub(crate) sweep: &'a [SweepPoint],
    pub(crate) machine: &'a Machine,
}

/// One line of a chart: its legend label, its colour and its points (x, y).
#[derive(Debug, Clone)]
pub(crate) struct Series {
    pub(crate) label: String,
    pub(crate) color: RGBColor,
    pub(crate) points: Vec<(f64, f64)>,
}

/// Writes every chart `report` has data for into `out`'s directory, each named after `out`'s
/// file stem (`cluster-bench.json` gives `cluster-bench-cdf-serial-current_thread.svg`, ...),
/// and returns their paths in the order written.
pub(crate) fn write(report: &Report<'_>, out: &Path) -> Result<Vec<PathBuf>, String> {
    let dir = out.parent().unwrap_or(Path::new(""));
    let stem = out
        .file_stem()
        .map_or("cluster-bench".into(), |s| s.to_string_lossy().into_owned());
    let mut written = Vec::new();
    for (name, svg) in charts(report)? {
        let path = dir.join(format!("{stem}-{name}.svg"));
        std::fs::write(&path, svg).map_err(|e| format!("writing {}: {e}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// Every chart as (file-name part, SVG text).
fn charts(report: &Report<'_>) -> Result<Vec<(String, String)>, String> {
    let server = &report.machine.server;
    let mut charts = Vec::new();
    for (chart, pass) in row_groups(report.rows) {
        let rows =
            (report.rows.iter()).filter(|r| chart_of(r.scenario) == chart && pass_of(r) == pass);
        let curves: Vec<Series> = (rows.enumerate())
            .map(|(i, r)| {
                // Where one chart holds several scenarios (`nodes N=1`, ...), each curve
                // has a colour of its own.
                let color = if r.scenario == chart {
                    color(r.subject, i)
                } else {
                    PALETTE[i % PALETTE.len()]
                };
                curve(&subject_label(r, pass), color, &r.summary)
            })
            .collect();
        let title = format!("{chart}: latency CDF ({pass} pass, {server})");
        let name = format!("cdf-{}-{}", slug(chart), slug(pass));
        // A contended row's latencies are its lock calls' waits (report.rs, `ContendedRow`).
        let contended = report
            .rows
            .iter()
            .any(|r| chart_of(r.scenario) == chart && r.contended.is_some());
        let what = if contended { "wait to acquire" } else { CYCLE };
        charts.push((name, cdf::draw(&title, what, &curves)?));
    }
    if let Some(kinds) = report.kinds {
        for (part, curves) in kinds_curves(kinds) {
            let title = format!("kinds, {part}: latency CDF ({}, {server})", kinds.runtime);
            let svg = cdf::draw(&title, CYCLE, &curves)?;
            charts.push((format!("cdf-kinds-{part}"), svg));
        }
    }
    if !report.sweep.is_empty() {
        let title = format!("Throughput against concurrency (current_thread pass, {server})");
        let lines = sweep_lines(report.sweep);
        charts.push(("throughput".to_owned(), throughput::draw(&title, &lines)?));
    }
    let panels = contended_panels(report.rows);
    if !panels.is_empty() {
        let title = format!("Contended: sections/s against the ceiling 1 / section ({server})");
        charts.push(("contended".to_owned(), ceiling::draw(&title, &panels)?));
    }
    Ok(charts)
}

/// The (chart, pass) of every row, in the rows' order, each once.
fn row_groups(rows: &[Row]) -> Vec<(&'static str, &'static str)> {
    let mut groups = Vec::new();
    for r in rows {
        let group = (chart_of(r.scenario), pass_of(r));
        if !groups.contains(&group) {
            groups.push(group);
        }
    }
    groups
}

/// The CDF chart a scenario's rows go on: the scenario's first word, so that `nodes N=1` to
/// `nodes N=9` share one, and so do `release healthy` and `release paused`.
fn chart_of(scenario: &'static str) -> &'static str {
    scenario.split(' ').next().unwrap_or(scenario)
}

/// The pass a row ran in: `multi_thread(2)`, or `current_thread` (which also hosts the
/// drivers with their own thread, whose rows some scenarios label `own-thread` throughout).
fn pass_of(row: &Row) -> &'static str {
    if row.baseline_runtime.starts_with("multi") {
        row.baseline_runtime
    } else {
        "current_thread"
    }
}

/// A row's legend label: the subject, its runtime where it differs from the pass's, the
/// rest of its scenario's name where the chart holds several (`N=3`, `paused`), and its
/// p50 and p99.
fn subject_label(row: &Row, pass: &str) -> String {
    let own = if row.runtime == pass {
        String::new()
    } else {
        format!(" ({})", row.runtime)
    };
    let part = row
        .scenario
        .split_once(' ')
        .map_or(String::new(), |(_, p)| format!(", {p}"));
    let (p50, p99) = (micros(row.summary.p50), micros(row.summary.p99));
    format!("{}{own}{part}: p50 {p50}, p99 {p99}", row.subject)
}

/// A summary's CDF as a chart line: x in microseconds, y the fraction in percent.
fn curve(label: &str, color: RGBColor, summary: &Summary) -> Series {
    let points = (summary.cdf.points())
        .map(|(fraction, latency)| (latency.as_secs_f64() * 1e6, fraction * 100.0))
        .collect();
    Series {
        label: label.to_owned(),
        color,
        points,
    }
}

/// `kinds`' two CDF charts: its serial kinds, and its concurrent subjects.
fn kinds_curves(kinds: &KindsReport) -> [(&'static str, Vec<Series>); 2] {
    let label =
        |name: &str, s: &Summary| format!("{name}: p50 {}, p99 {}", micros(s.p50), micros(s.p99));
    let serial = (kinds.serial.iter().enumerate())
        .map(|(i, r)| {
            curve(
                &label(r.name, &r.summary),
                PALETTE[i % PALETTE.len()],
                &r.summary,
            )
        })
        .collect();
    let parts = [
        ("mutexes", &kinds.mutexes),
        ("readers of one resource", &kinds.readers),
        ("readers on distinct resources", &kinds.readers_distinct),
    ];
    let concurrent = (parts.iter().enumerate())
        .map(|(i, (name, s))| {
            let name = format!("{} {name}", kinds.workers);
            curve(&label(&name, s), PALETTE[i % PALETTE.len()], s)
        })
        .collect();
    [("serial", serial), ("concurrent", concurrent)]
}

/// One line per subject of the sweep: x the workers, y the locks per second.
fn sweep_lines(points: &[SweepPoint]) -> Vec<Series> {
    let mut lines: Vec<Series> = Vec::new();
    for p in points {
        let at = (p.workers as f64, p.summary.ops_per_s);
        match lines.iter_mut().find(|l| l.label == p.subject) {
            Some(line) => line.points.push(at),
            None => lines.push(Series {
                label: p.subject.to_owned(),
                color: color(p.subject, lines.len()),
                points: vec![at],
            }),
        }
    }
    lines
}

/// One panel per contended scenario, one bar per subject: its sections/s and 1 / its
/// sections' p50 (the ceiling of a lock that hands over in no time).
fn contended_panels(rows: &[Row]) -> Vec<Panel> {
    let mut panels: Vec<Panel> = Vec::new();
    for r in rows {
        let Some(c) = &r.contended else { continue };
        let section = c.section.p50.as_secs_f64();
        let bar = Bar {
            label: r.subject.to_owned(),
            color: color(r.subject, 0),
            per_s: r.summary.ops_per_s,
            ceiling_per_s: if section > 0.0 { 1.0 / section } else { 0.0 },
        };
        match panels.iter_mut().find(|p| p.title == r.scenario) {
            Some(panel) => panel.bars.push(bar),
            None => panels.push(Panel {
                title: r.scenario.to_owned(),
                bars: vec![bar],
            }),
        }
    }
    panels
}

/// A subject's colour, the same in every chart for the usual subjects; the others take the
/// palette's `i`th.
fn color(subject: &str, i: usize) -> RGBColor {
    match subject {
        "raw" => RGBColor(0x44, 0x44, 0x44),
        "tokio" => PALETTE[0],
        "blocking" => PALETTE[1],
        "rslock" => PALETTE[3],
        "async-std" => PALETTE[2],
        _ => PALETTE[4 + i % (PALETTE.len() - 4)],
    }
}

/// A file-name part: ASCII letters, digits and `_`, the rest as `-`, no `-` at either end.
fn slug(s: &str) -> String {
    let mapped: String = (s.chars())
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    mapped.trim_matches('-').to_owned()
}

/// The x axis of most CDFs: a whole acquire + release.
const CYCLE: &str = "latency per cycle (acquire + release)";

/// Colours that tell apart on white (matplotlib's "tab10").
const PALETTE: [RGBColor; 10] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
];

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// `n` series of 7 points, point `j` of series `i` at `at(i, j)`.
    pub(in crate::charts) fn synthetic(
        n: usize,
        at: impl Fn(usize, usize) -> (f64, f64),
    ) -> Vec<Series> {
        (0..n)
            .map(|i| Series {
                label: format!("subject{i}"),
                color: PALETTE[i],
                points: (0..7).map(|j| at(i, j)).collect(),
            })
            .collect()
    }

    /// The text of every `<text>` element of `svg`, trimmed.
    pub(in crate::charts) fn texts(svg: &str) -> Vec<&str> {
        (svg.split("<text").skip(1))
            .filter_map(|t| t.split_once('>')?.1.split_once("</text>"))
            .map(|(text, _)| text.trim())
            .collect()
    }

    /// How many drawn lines (`<polyline>`) are `width` pixels wide: the axes and the mesh
    /// are 1 pixel, the series wider.
    pub(in crate::charts) fn lines_of_width(svg: &str, width: u32) -> usize {
        (svg.split("<polyline").skip(1))
            .filter(|p| p.contains(&format!("stroke-width=\"{width}\"")))
            .count()
    }

    /// Asserts `svg` is one `<svg>` element whose tags all close in order.
    pub(in crate::charts) fn well_formed(svg: &str) {
        assert!(svg.starts_with("<svg "), "{svg}");
        assert!(svg.trim_end().ends_with("</svg>"), "{svg}");
        assert!(
            svg.contains("xmlns=\"http://www.w3.org/2000/svg\""),
            "{svg}"
        );
        let mut open: Vec<&str> = Vec::new();
        for tag in svg.split('<').skip(1) {
            let tag = tag.split('>').next().unwrap_or_default();
            if let Some(closing) = tag.strip_prefix('/') {
                assert_eq!(
                    open.pop(),
                    Some(closing.trim()),
                    "</{closing}> closes nothing"
                );
            } else if !tag.ends_with('/') && !tag.starts_with(['?', '!']) {
                open.push(tag.split_whitespace().next().unwrap_or_default());
            }
        }
        assert!(open.is_empty(), "unclosed: {open:?}");
        assert_eq!(svg.matches("<svg").count(), 1);
    }

    #[test]
    fn scenarios_of_one_family_share_a_chart() {
        assert_eq!(chart_of("nodes N=3"), "nodes");
        assert_eq!(chart_of("release paused"), "release");
        assert_eq!(chart_of("contended2x4"), "contended2x4");
    }

    #[test]
    fn names_are_file_safe() {
        assert_eq!(slug("nodes N=3"), "nodes-N-3");
        assert_eq!(slug("multi_thread(2)"), "multi_thread-2");
        assert_eq!(slug("serial"), "serial");
    }

    #[test]
    fn usual_subjects_keep_their_colour() {
        assert_eq!(color("tokio", 5), color("tokio", 0));
        assert_ne!(color("tokio", 0), color("blocking", 0));
        assert_ne!(color("tokio-j1", 0), color("tokio", 0));
    }
}
