//! What the runs of the script tables (kinds_run.rs, queue_run.rs) share: every row sent
//! three ways (`EVALSHA` after `SCRIPT LOAD`, `EVAL`, `EVALSHA` on an empty cache), and one
//! [`RowsReport`] of the rows that passed and those that failed.

use std::fmt;

use crate::table::Send;
use crate::target::Target;

/// The three ways every row of a script table goes out.
const SENDS: [Send; 3] = [Send::Sha, Send::Eval, Send::ShaFlushed];

/// A row of a script table, as a report names it: its script and its name.
pub trait Row: Copy {
    /// The table's scripts.
    type Script: Copy + fmt::Display;

    /// The script the row sends.
    fn script(&self) -> Self::Script;

    /// What the row shows.
    fn name(&self) -> &'static str;
}

/// What a run of a script table found.
#[derive(Debug)]
pub struct RowsReport<R> {
    /// Which table: "kinds", "queue".
    pub table: &'static str,
    /// The target, as it describes itself.
    pub target: String,
    /// Rows that did what the table says, with how they were sent.
    pub passed: Vec<(R, Send)>,
    /// Rows that did not, with how they were sent and what differed.
    pub failed: Vec<(R, Send, String)>,
}

impl<R: Row> RowsReport<R> {
    /// Whether every row passed.
    pub fn is_clean(&self) -> bool {
        self.failed.is_empty()
    }

    /// The failed rows as `(script, name, send)`, in the table's order.
    pub fn failed_rows(&self) -> Vec<(R::Script, &'static str, Send)> {
        let rows = self.failed.iter();
        rows.map(|(c, send, _)| (c.script(), c.name(), *send))
            .collect()
    }

    /// The rows that failed when sent as `send`, as `(script, name)`, in the table's order.
    pub fn failed_by(&self, send: Send) -> Vec<(R::Script, &'static str)> {
        let rows = self.failed.iter().filter(|(_, s, _)| *s == send);
        rows.map(|(c, _, _)| (c.script(), c.name())).collect()
    }
}

/// Sends each of `rows` each of the three ways with `run_case` (the row, the way, its index
/// in `rows`; `Ok(Some(why))` where it broke the contract); `Err` only when the target
/// itself fails.
pub(crate) fn run_each<R: Row>(
    target: &mut dyn Target,
    table: &'static str,
    rows: &[R],
    mut run_case: impl FnMut(&mut dyn Target, &R, Send, usize) -> Result<Option<String>, String>,
) -> Result<RowsReport<R>, String> {
    let mut report = RowsReport {
        table,
        target: target.describe(),
        passed: Vec::new(),
        failed: Vec::new(),
    };
    for (i, case) in rows.iter().enumerate() {
        for send in SENDS {
            match run_case(target, case, send, i)? {
                None => report.passed.push((*case, send)),
                Some(why) => report.failed.push((*case, send, why)),
            }
        }
    }
    Ok(report)
}

impl<R: Row> fmt::Display for RowsReport<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.passed.len() + self.failed.len();
        writeln!(
            f,
            "{} contract on {}: {} of {total} row sends passed, {} failed",
            self.table,
            self.target,
            self.passed.len(),
            self.failed.len()
        )?;
        for (case, send, why) in &self.failed {
            let (script, name) = (case.script(), case.name());
            writeln!(f, "  FAILED {script} {send:?} × {name}: {why}")?;
        }
        Ok(())
    }
}
