//! What every chart draws alike: a white SVG page, the labelled lines, the legend box and
//! the fonts. What a chart shows is its own module's.

use plotters::coord::{CoordTranslate, Shift};
use plotters::prelude::*;

use super::Series;

/// The page a chart draws on.
pub(super) type Page<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Runs `draw` on a white page of `size` pixels and returns the SVG text.
pub(super) fn render(
    size: (u32, u32),
    draw: impl FnOnce(&Page<'_>) -> Result<(), String>,
) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(drawing)?;
        draw(&root)?;
        root.present().map_err(drawing)?;
    }
    Ok(svg)
}

/// Draws each of `series` as a 2-pixel line through its points placed by `at`, labelled
/// for the legend.
pub(super) fn draw_lines<CT: CoordTranslate<From = (f64, f64)>>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, CT>,
    series: &[Series],
    at: impl Fn(&(f64, f64)) -> (f64, f64),
) -> Result<(), String> {
    for s in series {
        let style = s.color.stroke_width(2);
        chart
            .draw_series(LineSeries::new(s.points.iter().map(&at), style))
            .map_err(drawing)?
            .label(s.label.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], style));
    }
    Ok(())
}

/// Draws the legend of `chart`'s labelled series in a framed white box at `position`.
pub(super) fn draw_legend<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    position: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font((FONT, TICK_SIZE))
        .draw()
        .map_err(drawing)
}

/// A plotting error as the bench's error text.
pub(super) fn drawing<E: std::fmt::Debug>(e: E) -> String {
    format!("drawing a chart: {e:?}")
}

/// The mesh's light lines: a faint grey that leaves the series in front.
pub(super) const MESH: RGBColor = RGBColor(0xee, 0xee, 0xee);

/// The font of every text, and its sizes: titles, axis descriptions, ticks and legends
/// (plotters writes each size divided by 1.24 into the SVG: 21, 17 and 14.5 px).
pub(super) const FONT: &str = "sans-serif";
pub(super) const TITLE_SIZE: u32 = 26;
pub(super) const LABEL_SIZE: u32 = 21;
pub(super) const TICK_SIZE: u32 = 18;
