//! What a bench phase measured, how workers' figures merge, and the table printed at
//! the end.
//!
//! Latencies are kept as raw samples (microseconds) rather than in a histogram: a run
//! is bounded in time, so there are at most a few hundred thousand of them, and exact
//! percentiles over the merged samples of every worker are simpler to trust.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::time::Duration;

use herald_host::print_table;
use serde::{Deserialize, Serialize};

/// Samples kept per measure; a bounded run stays far below it.
const MAX_SAMPLES: usize = 4_000_000;
/// Distinct error messages kept per report; more are counted as "other".
const MAX_ERROR_KINDS: usize = 16;

/// One phase of one worker, or the merge of every worker's.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(super) struct Report {
    /// Wall-clock seconds of the phase (the slowest worker's, once merged).
    pub elapsed_s: f64,
    counts: BTreeMap<String, u64>,
    /// Samples by what they measure: microseconds for latencies, or plain numbers.
    latencies: BTreeMap<String, Vec<u32>>,
    errors: BTreeMap<String, u64>,
}

impl Report {
    pub fn add(&mut self, what: &str, n: u64) {
        *self.counts.entry(what.to_owned()).or_default() += n;
    }

    pub fn latency(&mut self, what: &str, value: Duration) {
        self.sample(what, u32::try_from(value.as_micros()).unwrap_or(u32::MAX));
    }

    /// A plain number to take percentiles of (a burst size, say).
    pub fn sample(&mut self, what: &str, value: u32) {
        let samples = self.latencies.entry(what.to_owned()).or_default();
        if samples.len() < MAX_SAMPLES {
            samples.push(value);
        }
    }

    /// Count an error under its message, so the reader sees what went wrong.
    pub fn error(&mut self, err: impl Display) {
        let message = err.to_string();
        let key = if self.errors.len() < MAX_ERROR_KINDS || self.errors.contains_key(&message) {
            message
        } else {
            "other".to_owned()
        };
        *self.errors.entry(key).or_default() += 1;
    }

    /// The counts and errors so far, without the samples: a progress report.
    pub fn without_samples(&self) -> Report {
        Report {
            elapsed_s: self.elapsed_s,
            counts: self.counts.clone(),
            latencies: BTreeMap::new(),
            errors: self.errors.clone(),
        }
    }

    pub fn merge(&mut self, other: Report) {
        self.elapsed_s = self.elapsed_s.max(other.elapsed_s);
        for (what, n) in other.counts {
            self.add(&what, n);
        }
        for (what, samples) in other.latencies {
            let mine = self.latencies.entry(what).or_default();
            let room = MAX_SAMPLES.saturating_sub(mine.len());
            mine.extend(samples.into_iter().take(room));
        }
        for (message, n) in other.errors {
            *self.errors.entry(message).or_default() += n;
        }
    }

    /// Sort the samples; call once after the last merge, before reading percentiles.
    pub fn finish(&mut self) {
        for samples in self.latencies.values_mut() {
            samples.sort_unstable();
        }
    }

    pub fn count(&self, what: &str) -> u64 {
        self.counts.get(what).copied().unwrap_or(0)
    }

    /// `what` per second over the phase.
    pub fn rate(&self, what: &str) -> f64 {
        if self.elapsed_s > 0.0 {
            self.count(what) as f64 / self.elapsed_s
        } else {
            0.0
        }
    }

    /// The `q` quantile (0..=1) of a measure; `finish` first.
    pub fn quantile(&self, what: &str, q: f64) -> Option<u32> {
        let samples = self.latencies.get(what).filter(|s| !s.is_empty())?;
        let rank = ((samples.len() - 1) as f64 * q).round() as usize;
        samples.get(rank).copied()
    }

    /// The `q` quantile of a latency, in milliseconds; `finish` first.
    pub fn quantile_ms(&self, what: &str, q: f64) -> Option<f64> {
        self.quantile(what, q).map(|us| f64::from(us) / 1000.0)
    }

    /// The sorted samples of a measure, in microseconds; `finish` first.
    pub fn samples(&self, what: &str) -> &[u32] {
        self.latencies.get(what).map_or(&[], Vec::as_slice)
    }

    pub fn errors(&self) -> impl Iterator<Item = (&str, u64)> {
        self.errors.iter().map(|(m, n)| (m.as_str(), *n))
    }
}

/// How a figure reads and which way is better.
#[derive(Debug, Clone, Copy)]
pub(super) enum Unit {
    PerSecond,
    Millis,
    KiB,
    MiB,
    MiBPerSecond,
    Count,
    Percent,
}

impl Unit {
    fn format(self, value: f64) -> String {
        match self {
            Unit::PerSecond => format!("{value:.0}/s"),
            Unit::Millis => format!("{value:.3} ms"),
            Unit::KiB => format!("{value:.1} KiB"),
            Unit::MiB => format!("{value:.0} MiB"),
            Unit::MiBPerSecond => format!("{value:.1} MiB/s"),
            Unit::Count => format!("{value:.0}"),
            Unit::Percent => format!("{value:.0}%"),
        }
    }
}

/// A goal a figure is held to.
#[derive(Debug, Clone)]
pub(super) struct Goal {
    pub text: String,
    pub met: bool,
}

impl Goal {
    pub fn new(text: impl Into<String>, met: bool) -> Goal {
        Goal {
            text: text.into(),
            met,
        }
    }
}

struct Row {
    metric: String,
    unit: Unit,
    herald: Option<f64>,
    bare: Option<f64>,
    goal: Option<Goal>,
}

/// The table printed at the end of a run: Herald's figure, the bare baseline's, their
/// ratio, and the goal when there is one.
#[derive(Default)]
pub(super) struct Table {
    rows: Vec<Row>,
    /// Errors the clients saw, by target.
    errors: Vec<String>,
}

impl Table {
    pub fn row(
        &mut self,
        metric: &str,
        unit: Unit,
        herald: Option<f64>,
        bare: Option<f64>,
        goal: Option<Goal>,
    ) {
        self.rows.push(Row {
            metric: metric.to_owned(),
            unit,
            herald,
            bare,
            goal,
        });
    }

    /// A row for the `q` quantile of the latency `what`.
    pub fn latency(&mut self, label: &str, herald: &Report, bare: &Report, what: &str, q: f64) {
        let (h, b) = (herald.quantile_ms(what, q), bare.quantile_ms(what, q));
        self.row(label, Unit::Millis, h, b, None);
    }

    /// Rows for the p50 and the p99 of the latency `what`, named by `labels`.
    pub fn quantiles(&mut self, labels: [&str; 2], herald: &Report, bare: &Report, what: &str) {
        for (label, q) in labels.into_iter().zip([0.5, 0.99]) {
            self.latency(label, herald, bare, what, q);
        }
    }

    /// A row with the count of `what` in each.
    pub fn count(&mut self, label: &str, herald: &Report, bare: &Report, what: &str) {
        let (h, b) = (herald.count(what) as f64, bare.count(what) as f64);
        self.row(label, Unit::Count, Some(h), Some(b), None);
    }

    /// Note the errors a target's clients saw, to print under the table.
    pub fn errors_of(&mut self, target: &str, report: &Report) {
        for (message, n) in report.errors() {
            self.errors.push(format!("{target}: {message} (x{n})"));
        }
    }

    /// Goals this run missed.
    pub fn missed(&self) -> usize {
        self.rows
            .iter()
            .filter(|r| r.goal.as_ref().is_some_and(|g| !g.met))
            .count()
    }

    pub fn print(&self) {
        let na = || "n/a".to_owned();
        let rows: Vec<[String; 5]> = self
            .rows
            .iter()
            .map(|r| {
                let ratio = match (r.herald, r.bare) {
                    (Some(h), Some(b)) if b > 0.0 => format!("{:.2}", h / b),
                    _ => "-".to_owned(),
                };
                let goal = r.goal.as_ref().map_or(String::new(), |g| {
                    format!("{} {}", g.text, if g.met { "MET" } else { "MISSED" })
                });
                [
                    r.metric.clone(),
                    r.herald.map_or_else(na, |v| r.unit.format(v)),
                    r.bare.map_or_else(|| "-".to_owned(), |v| r.unit.format(v)),
                    ratio,
                    goal,
                ]
            })
            .collect();
        print_table(&["METRIC", "HERALD", "BARE", "RATIO", "GOAL"], &rows);
        if !self.errors.is_empty() {
            println!("errors seen by the clients:");
            for line in &self.errors {
                println!("  {line}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_reports_add_counts_and_pool_samples() {
        let mut a = Report {
            elapsed_s: 2.0,
            ..Report::default()
        };
        a.add("ok", 10);
        for ms in [1, 2, 3] {
            a.latency("rtt", Duration::from_millis(ms));
        }
        let mut b = Report {
            elapsed_s: 4.0,
            ..Report::default()
        };
        b.add("ok", 30);
        for ms in [4, 5] {
            b.latency("rtt", Duration::from_millis(ms));
        }
        b.error("boom");
        a.merge(b);
        a.finish();
        assert_eq!(a.count("ok"), 40);
        assert_eq!(a.rate("ok"), 10.0);
        assert_eq!(a.quantile_ms("rtt", 0.5), Some(3.0));
        assert_eq!(a.quantile_ms("rtt", 1.0), Some(5.0));
        assert_eq!(a.quantile_ms("missing", 0.5), None);
        assert_eq!(a.errors().collect::<Vec<_>>(), [("boom", 1)]);
    }

    #[test]
    fn error_kinds_are_bounded() {
        let mut r = Report::default();
        for i in 0..100 {
            r.error(format!("error {i}"));
        }
        assert_eq!(r.errors().count(), MAX_ERROR_KINDS + 1);
        assert_eq!(r.errors().map(|(_, n)| n).sum::<u64>(), 100);
    }
}
