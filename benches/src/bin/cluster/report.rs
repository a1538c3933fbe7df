//! The results as a markdown table (stdout) and as JSON (`target/cluster-bench.json`), with
//! the targets checked. The JSON is written by hand; nothing here measures anything.

use std::fmt::Write as _;
use std::time::Duration;

use crate::stats::Summary;

/// Serial: tokio's p50 at most this many times raw's.
pub(crate) const SERIAL_P50_RATIO_MAX: f64 = 1.15;
/// concurrent32: tokio's cycles per second at least this share of raw's.
pub(crate) const CONCURRENT_OPS_RATIO_MIN: f64 = 0.8;

/// One scenario on one runtime flavour, both subjects.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) scenario: &'static str,
    pub(crate) flavour: &'static str,
    pub(crate) tokio: Summary,
    pub(crate) raw: Summary,
}

/// Where the numbers were taken.
#[derive(Debug, Clone)]
pub(crate) struct Machine {
    pub(crate) nproc: usize,
    pub(crate) cpu: String,
    pub(crate) server: String,
    pub(crate) nodes: usize,
    pub(crate) quick: bool,
}

impl Row {
    pub(crate) fn p50_ratio(&self) -> f64 {
        ratio(self.tokio.p50.as_secs_f64(), self.raw.p50.as_secs_f64())
    }

    pub(crate) fn ops_ratio(&self) -> f64 {
        ratio(self.tokio.ops_per_s, self.raw.ops_per_s)
    }

    /// The target for this scenario, if it has one: (description, met).
    pub(crate) fn target(&self) -> Option<(String, bool)> {
        match self.scenario {
            "serial" => Some((
                format!("p50 ratio <= {SERIAL_P50_RATIO_MAX}"),
                self.p50_ratio() <= SERIAL_P50_RATIO_MAX,
            )),
            "concurrent32" => Some((
                format!("ops/s ratio >= {CONCURRENT_OPS_RATIO_MIN}"),
                self.ops_ratio() >= CONCURRENT_OPS_RATIO_MIN,
            )),
            _ => None,
        }
    }
}

impl Machine {
    /// `nproc`, `/proc/cpuinfo`'s model name, and the server binary's name and version.
    pub(crate) fn detect(server: String, nodes: usize, quick: bool) -> Self {
        let nproc = std::thread::available_parallelism().map_or(0, usize::from);
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|info| {
                info.lines()
                    .find_map(|l| l.strip_prefix("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, name)| name.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".to_owned());
        Self {
            nproc,
            cpu,
            server,
            nodes,
            quick,
        }
    }
}

/// The markdown table, a machine line, and one line per target.
pub(crate) fn markdown(rows: &[Row], machine: &Machine) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} nodes ({}), nproc = {}, CPU `{}`{}\n",
        machine.nodes,
        machine.server,
        machine.nproc,
        machine.cpu,
        if machine.quick { ", --quick" } else { "" }
    );
    s.push_str(
        "| scenario | runtime | tokio p50 | tokio p99 | tokio ops/s | raw p50 | raw p99 | \
         raw ops/s | p50 tokio/raw | ops/s tokio/raw |\n",
    );
    s.push_str("|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.0} | {} | {} | {:.0} | {:.2} | {:.2} |",
            r.scenario,
            r.flavour,
            micros(r.tokio.p50),
            micros(r.tokio.p99),
            r.tokio.ops_per_s,
            micros(r.raw.p50),
            micros(r.raw.p99),
            r.raw.ops_per_s,
            r.p50_ratio(),
            r.ops_ratio(),
        );
    }
    s.push_str(
        "\nCPU time of the bench process (all its threads, not the nodes') per cycle:\n\n\
         | scenario | runtime | tokio | raw | tokio/raw |\n|---|---|---|---|---|\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.2} |",
            r.scenario,
            r.flavour,
            micros(r.tokio.cpu_per_cycle),
            micros(r.raw.cpu_per_cycle),
            ratio(
                r.tokio.cpu_per_cycle.as_secs_f64(),
                r.raw.cpu_per_cycle.as_secs_f64()
            ),
        );
    }
    s.push('\n');
    for r in rows {
        if let Some((target, met)) = r.target() {
            let verdict = if met { "met" } else { "MISSED" };
            let _ = writeln!(s, "- {} / {}: {target}: {verdict}", r.scenario, r.flavour);
        }
    }
    s
}

/// The same as JSON; durations in microseconds.
pub(crate) fn json(rows: &[Row], machine: &Machine) -> String {
    let mut s = String::from("{\n");
    let _ = writeln!(
        s,
        "  \"machine\": {{\"nproc\": {}, \"cpu\": {}, \"server\": {}, \"nodes\": {}}},",
        machine.nproc,
        quote(&machine.cpu),
        quote(&machine.server),
        machine.nodes
    );
    let _ = writeln!(s, "  \"quick\": {},", machine.quick);
    let _ = writeln!(
        s,
        "  \"targets\": {{\"serial_p50_ratio_max\": {SERIAL_P50_RATIO_MAX}, \
         \"concurrent32_ops_ratio_min\": {CONCURRENT_OPS_RATIO_MIN}}},"
    );
    s.push_str("  \"results\": [\n");
    for (i, r) in rows.iter().enumerate() {
        let met = r
            .target()
            .map_or("null".to_owned(), |(_, met)| met.to_string());
        let _ = write!(
            s,
            "    {{\"scenario\": {}, \"runtime\": {}, \"tokio\": {}, \"raw\": {}, \
             \"p50_ratio\": {}, \"ops_ratio\": {}, \"target_met\": {met}}}",
            quote(r.scenario),
            quote(r.flavour),
            summary_json(&r.tokio),
            summary_json(&r.raw),
            number(r.p50_ratio()),
            number(r.ops_ratio()),
        );
        s.push_str(if i + 1 < rows.len() { ",\n" } else { "\n" });
    }
    s.push_str("  ]\n}\n");
    s
}

fn summary_json(s: &Summary) -> String {
    format!(
        "{{\"cycles\": {}, \"p50_us\": {:.1}, \"p99_us\": {:.1}, \"ops_per_s\": {:.1}, \
         \"cpu_us_per_cycle\": {:.1}}}",
        s.cycles,
        s.p50.as_secs_f64() * 1e6,
        s.p99.as_secs_f64() * 1e6,
        s.ops_per_s,
        s.cpu_per_cycle.as_secs_f64() * 1e6,
    )
}

/// A JSON number with 4 decimals, or `null` for NaN and infinities.
fn number(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.4}")
    } else {
        "null".to_owned()
    }
}

fn micros(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { f64::NAN }
}

/// A JSON string literal.
fn quote(text: &str) -> String {
    let mut s = String::with_capacity(text.len() + 2);
    s.push('"');
    for c in text.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(s, "\\u{:04x}", u32::from(c));
            }
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_json_strings() {
        assert_eq!(quote("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }
}
