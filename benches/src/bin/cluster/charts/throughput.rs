//! Throughput against concurrency: one line per subject, locks per second against the
//! workers running cycles at once, on a log-2 axis (1, 2, 4, ..., 64).

use plotters::prelude::*;

use super::Series;
use super::svg::{self, FONT, LABEL_SIZE, MESH, TICK_SIZE, TITLE_SIZE, drawing};

/// The chart as SVG text; `lines`' points are (workers, cycles per second).
pub(super) fn draw(title: &str, lines: &[Series]) -> Result<String, String> {
    let points = || lines.iter().flat_map(|l| l.points.iter());
    let most = points()
        .map(|p| p.0)
        .fold(1.0, f64::max)
        .log2()
        .ceil()
        .max(1.0);
    let top = points().map(|p| p.1).fold(0.0, f64::max).max(1.0) * 1.1;
    // x is log2(workers), drawn linear, so that each doubling is one step.
    let at = |&(workers, per_s): &(f64, f64)| (workers.max(1.0).log2(), per_s);
    svg::render(SIZE, |page| {
        let mut chart = ChartBuilder::on(page)
            .caption(title, (FONT, TITLE_SIZE))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(80)
            .build_cartesian_2d(-0.2..most + 0.2, 0.0..top)
            .map_err(drawing)?;
        chart
            .configure_mesh()
            .x_desc("workers (tasks, or threads for blocking)")
            .y_desc("locks per second (acquire + release)")
            .axis_desc_style((FONT, LABEL_SIZE))
            .label_style((FONT, TICK_SIZE))
            .x_labels(most as usize + 1)
            .x_label_formatter(&|x| format!("{:.0}", x.exp2()))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .light_line_style(MESH)
            .draw()
            .map_err(drawing)?;
        svg::draw_lines(&mut chart, lines, at)?;
        for l in lines {
            let dots = (l.points.iter()).map(|p| Circle::new(at(p), 4, l.color.filled()));
            chart.draw_series(dots).map_err(drawing)?;
        }
        svg::draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)
    })
}

/// Pixels.
const SIZE: (u32, u32) = (960, 560);

#[cfg(test)]
mod tests {
    use super::super::tests::{lines_of_width, synthetic, texts, well_formed};
    use super::*;

    #[test]
    fn draws_one_line_per_subject() {
        let lines = synthetic(4, |i, j| (f64::from(1 << j), 1000.0 * (i + j) as f64));
        let svg = draw("throughput", &lines).expect("drawn");
        well_formed(&svg);
        assert_eq!(lines_of_width(&svg, 2), 2 * lines.len(), "{svg}");
        let texts = texts(&svg);
        for l in &lines {
            assert_eq!(
                texts.iter().filter(|t| **t == l.label).count(),
                1,
                "{texts:?}"
            );
        }
        // A dot per point.
        let dots: usize = lines.iter().map(|l| l.points.len()).sum();
        assert_eq!(svg.matches("<circle").count(), dots, "{svg}");
        for workers in ["1", "2", "64"] {
            assert!(texts.contains(&workers), "no tick {workers} in {texts:?}");
        }
    }
}
