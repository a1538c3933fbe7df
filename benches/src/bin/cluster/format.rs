//! How numbers are shown in the report: ratios, verdicts, durations as text, and rounding
//! for the JSON. A leaf module: the markdown (`report.rs`, `held/row.rs`) and the JSON
//! (`json.rs`) both use it.

use std::time::Duration;

/// `a / b`, or NaN when there is no baseline.
pub(crate) fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { f64::NAN }
}

/// Two decimals, or `–` when there is no baseline.
pub(crate) fn fixed(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}")
    } else {
        "–".to_owned()
    }
}

pub(crate) fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

/// Seconds with one decimal.
pub(crate) fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// Whole microseconds.
pub(crate) fn micros(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

/// A JSON number rounded to `decimals` places, or `None` (JSON `null`) for NaN and
/// infinities, which JSON cannot hold.
pub(crate) fn rounded(x: f64, decimals: i32) -> Option<f64> {
    let scale = 10f64.powi(decimals);
    x.is_finite().then(|| (x * scale).round() / scale)
}

/// A duration in microseconds, one decimal.
pub(crate) fn us(d: Duration) -> Option<f64> {
    rounded(d.as_secs_f64() * 1e6, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_numbers_are_rounded_and_never_nan() {
        assert_eq!(rounded(1.234_56, 4), Some(1.2346));
        assert_eq!(rounded(f64::NAN, 4), None);
        assert_eq!(rounded(f64::INFINITY, 1), None);
        assert_eq!(us(Duration::from_nanos(1_234_567)), Some(1234.6));
        assert_eq!(fixed(ratio(1.0, 0.0)), "–");
    }
}
