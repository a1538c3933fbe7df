//! Sections per second against their ceiling: a panel per contended scenario, a bar per
//! subject, and across each bar a line at 1 / section (a lock that hands over in no time),
//! with the bar's share of it written above.

use plotters::coord::ranged1d::{SegmentValue, SegmentedCoord};
use plotters::coord::types::{RangedCoordf64, RangedCoordusize};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::svg::{self, FONT, LABEL_SIZE, MESH, Page, TICK_SIZE, TITLE_SIZE, drawing};

/// One scenario's bars.
#[derive(Debug, Clone)]
pub(super) struct Panel {
    pub(super) title: String,
    pub(super) bars: Vec<Bar>,
}

/// One subject: what it did and what it could have.
#[derive(Debug, Clone)]
pub(super) struct Bar {
    pub(super) label: String,
    pub(super) color: RGBColor,
    /// Sections per second.
    pub(super) per_s: f64,
    /// 1 / the section's length.
    pub(super) ceiling_per_s: f64,
}

/// The chart as SVG text, the panels side by side on one y scale.
pub(super) fn draw(title: &str, panels: &[Panel]) -> Result<String, String> {
    let bars = || panels.iter().flat_map(|p| p.bars.iter());
    let top = bars()
        .map(|b| b.per_s.max(b.ceiling_per_s))
        .fold(1.0, f64::max)
        * HEADROOM;
    svg::render(SIZE, |page| {
        let page = page.titled(title, (FONT, TITLE_SIZE)).map_err(drawing)?;
        let areas = page.split_evenly((1, panels.len().max(1)));
        for (i, (panel, area)) in panels.iter().zip(&areas).enumerate() {
            draw_panel(area, panel, top, i == 0)?;
        }
        Ok(())
    })
}

/// One panel: bars, ceiling lines, shares; the y description and legend on the first only.
fn draw_panel(area: &Page<'_>, panel: &Panel, top: f64, first: bool) -> Result<(), String> {
    let n = panel.bars.len();
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, (FONT, LABEL_SIZE))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(72)
        // A discrete range holds both ends: `0..n - 1` is n segments.
        .build_cartesian_2d((0..n.max(1) - 1).into_segmented(), 0.0..top)
        .map_err(drawing)?;
    draw_mesh(&mut chart, panel, first)?;
    let rects = panel.bars.iter().enumerate().map(|(i, b)| {
        let mut bar = Rectangle::new(
            [
                (SegmentValue::Exact(i), 0.0),
                (SegmentValue::Exact(i + 1), b.per_s),
            ],
            b.color.filled(),
        );
        bar.set_margin(0, 0, 10, 10);
        bar
    });
    let bar_key = |(x, y): (i32, i32)| {
        Rectangle::new(
            [(x, y - 6), (x + 16, y + 6)],
            RGBColor(0x99, 0x99, 0x99).filled(),
        )
    };
    (chart.draw_series(rects).map_err(drawing)?)
        .label("sections/s")
        .legend(bar_key);
    let ceiling = BLACK.stroke_width(3);
    let lines = panel.bars.iter().enumerate().map(|(i, b)| {
        let at = |x| (x, b.ceiling_per_s);
        PathElement::new(
            [at(SegmentValue::Exact(i)), at(SegmentValue::Exact(i + 1))],
            ceiling,
        )
    });
    (chart.draw_series(lines).map_err(drawing)?)
        .label("1 / section p50 (ceiling)")
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], ceiling));
    chart.draw_series(shares(panel, top)).map_err(drawing)?;
    if first {
        svg::draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    }
    Ok(())
}

/// The panel's axes: the subjects under the bars, sections/s up the first panel's side.
fn draw_mesh(chart: &mut Chart<'_, '_>, panel: &Panel, first: bool) -> Result<(), String> {
    let labels = |x: &SegmentValue<usize>| match x {
        SegmentValue::CenterOf(i) => panel
            .bars
            .get(*i)
            .map_or(String::new(), |b| b.label.clone()),
        _ => String::new(),
    };
    let mut mesh = chart.configure_mesh();
    mesh.disable_x_mesh()
        .x_labels(panel.bars.len())
        .x_label_formatter(&labels)
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style((FONT, TICK_SIZE))
        .axis_desc_style((FONT, LABEL_SIZE))
        .light_line_style(MESH);
    if first {
        mesh.y_desc("critical sections per second");
    }
    mesh.draw().map_err(drawing)?;
    Ok(())
}

/// Each bar's share of its ceiling, written above the higher of the two.
fn shares(
    panel: &Panel,
    top: f64,
) -> impl Iterator<Item = Text<'_, (SegmentValue<usize>, f64), String>> {
    panel.bars.iter().enumerate().map(move |(i, b)| {
        let share = if b.ceiling_per_s > 0.0 {
            b.per_s / b.ceiling_per_s
        } else {
            0.0
        };
        let style = TextStyle::from((FONT, TICK_SIZE).into_font())
            .pos(Pos::new(HPos::Center, VPos::Bottom));
        let y = b.per_s.max(b.ceiling_per_s) + top * 0.01;
        Text::new(
            format!("{share:.2}x"),
            (SegmentValue::CenterOf(i), y),
            style,
        )
    })
}

/// A panel's chart: a bar per subject on the x axis, sections per second up.
type Chart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<SegmentedCoord<RangedCoordusize>, RangedCoordf64>>;

/// The y axis's top over the highest bar or ceiling: room for the shares and the legend.
const HEADROOM: f64 = 1.4;

/// Pixels: three panels of three or four bars.
const SIZE: (u32, u32) = (1200, 480);

#[cfg(test)]
mod tests {
    use super::super::tests::{lines_of_width, texts, well_formed};
    use super::*;

    #[test]
    fn draws_a_bar_and_a_ceiling_per_subject() {
        let bar = |label: &str, per_s| Bar {
            label: label.to_owned(),
            color: RGBColor(0x1f, 0x77, 0xb4),
            per_s,
            ceiling_per_s: 870.0,
        };
        let panels: Vec<Panel> = ["contended8", "contended2x4", "contended4x2"]
            .map(|title| Panel {
                title: title.to_owned(),
                bars: vec![
                    bar("tokio", 704.0),
                    bar("blocking", 609.0),
                    bar("rslock", 300.0),
                ],
            })
            .into();
        let svg = draw("contended", &panels).expect("drawn");
        well_formed(&svg);
        let texts = texts(&svg);
        let count = |s: &str| texts.iter().filter(|t| **t == s).count();
        // Per panel, a share over each bar and each bar's label under the axis.
        assert_eq!(count("0.81x"), 3, "{texts:?}");
        assert_eq!(count("tokio"), 3, "{texts:?}");
        // 9 ceiling lines, and the legend's once.
        assert_eq!(lines_of_width(&svg, 3), 10, "{svg}");
        assert_eq!(count("1 / section p50 (ceiling)"), 1, "{texts:?}");
        assert_eq!(count("sections/s"), 1, "{texts:?}");
        for p in &panels {
            assert_eq!(count(&p.title), 1, "{texts:?}");
        }
    }
}
