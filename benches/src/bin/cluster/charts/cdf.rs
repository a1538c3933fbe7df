//! A latency CDF: one line per subject, latency on a log axis in microseconds against the
//! share of cycles at or below it in percent. Draws given points; `charts/mod.rs` picks them.

use plotters::prelude::*;

use super::Series;
use super::svg::{self, FONT, LABEL_SIZE, MESH, TICK_SIZE, TITLE_SIZE, drawing};

/// The chart as SVG text; `curves`' points are (microseconds, percent), ascending; `what`
/// names the latency on the x axis (`latency per cycle`, `wait to acquire`).
pub(super) fn draw(title: &str, what: &str, curves: &[Series]) -> Result<String, String> {
    let (lo, hi) = x_range(curves);
    svg::render(SIZE, |page| {
        let mut chart = ChartBuilder::on(page)
            .caption(title, (FONT, TITLE_SIZE))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(64)
            .build_cartesian_2d((lo..hi).log_scale(), 0.0..100.0)
            .map_err(drawing)?;
        chart
            .configure_mesh()
            .x_desc(format!("{what} (µs, log scale)"))
            .y_desc("cycles at or below (%)")
            .axis_desc_style((FONT, LABEL_SIZE))
            .label_style((FONT, TICK_SIZE))
            // Grid lines at every 1..9 x 10^k and no others; `tick` names the 1, 2 and 5.
            .x_labels(20)
            .x_max_light_lines(1)
            .y_max_light_lines(2)
            .x_label_formatter(&tick)
            .y_label_formatter(&|y| format!("{y:.0}"))
            .light_line_style(MESH)
            .draw()
            .map_err(drawing)?;
        svg::draw_lines(&mut chart, curves, |&(x, y)| (x.max(lo), y))?;
        svg::draw_legend(&mut chart, SeriesLabelPosition::LowerRight)
    })
}

/// A log axis's tick label: 1, 2 and 5 times a power of ten only, or the ticks between
/// crowd each other out.
fn tick(x: &f64) -> String {
    let mantissa = x / 10f64.powf(x.log10().floor());
    if [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-6) {
        format!("{x:.0}")
    } else {
        String::new()
    }
}

/// The x axis: from the power of ten at or under the fastest cycle (plotters' log axis
/// puts its grid lines and ticks from a power of ten up) to a little over the slowest, at
/// least 1 µs (a log axis cannot reach 0).
fn x_range(curves: &[Series]) -> (f64, f64) {
    let xs = || curves.iter().flat_map(|c| c.points.iter().map(|p| p.0));
    let lo = xs().filter(|&x| x > 0.0).fold(f64::INFINITY, f64::min);
    let hi = xs().fold(0.0, f64::max);
    if lo.is_finite() && hi > lo {
        (10f64.powf(lo.log10().floor()).max(1.0), hi * 1.2)
    } else {
        (1.0, 1e6)
    }
}

/// Pixels: wide enough for eight legend lines beside the curves.
const SIZE: (u32, u32) = (960, 560);

#[cfg(test)]
mod tests {
    use super::super::tests::{lines_of_width, synthetic, texts, well_formed};
    use super::*;

    const CYCLE: &str = "latency per cycle";

    #[test]
    fn draws_one_line_per_subject() {
        let curves = synthetic(3, |i, j| {
            (100.0 * (1.0 + i as f64) * (1.0 + j as f64), j as f64)
        });
        let svg = draw("serial: latency CDF", CYCLE, &curves).expect("drawn");
        well_formed(&svg);
        // Each curve once in the plot and once in the legend.
        assert_eq!(lines_of_width(&svg, 2), 2 * curves.len(), "{svg}");
        let texts = texts(&svg);
        for c in &curves {
            assert_eq!(
                texts.iter().filter(|t| **t == c.label).count(),
                1,
                "{texts:?}"
            );
        }
        assert!(
            texts.contains(&"latency per cycle (µs, log scale)"),
            "{texts:?}"
        );
    }

    #[test]
    fn ticks_at_one_two_five() {
        let ticks: Vec<String> = [100.0, 200.0, 300.0, 500.0, 7000.0]
            .iter()
            .map(tick)
            .collect();
        assert_eq!(ticks, ["100", "200", "", "500", ""]);
    }

    #[test]
    fn the_axis_starts_at_a_power_of_ten() {
        let curves = synthetic(2, |i, j| (150.0 + (i * j) as f64, j as f64));
        assert_eq!(x_range(&curves), (100.0, 156.0 * 1.2));
        assert_eq!(x_range(&[]), (1.0, 1e6));
    }

    #[test]
    fn no_data_still_draws_axes() {
        well_formed(&draw("empty", CYCLE, &[]).expect("drawn"));
    }
}
