//! The parent's reading of a soak: the samples of the curve, the memory after the warm-up
//! (a fitted line, flat or not) and the rows of the final table with their goals.

use std::time::Duration;

use super::Mix;
use crate::stats::Report;
use crate::talk::UTTERANCE_FRAMES;
use crate::Target;

/// Memory is flat when the fitted line rises by less than this share of the starting
/// memory over the measured part of the run.
const FLAT_SHARE: f64 = 0.01;

/// Counts of lost work, all of which must stay 0.
fn failures(r: &Report) -> u64 {
    [
        "dropped",
        "unanswered",
        "refused",
        "aborted",
        "speech_short",
    ]
    .iter()
    .map(|k| r.count(k))
    .sum()
}

fn setup_failures(r: &Report) -> u64 {
    ["timeouts", "refused", "failed", "not_attempted"]
        .iter()
        .map(|k| r.count(k))
        .sum()
}

fn answered(r: &Report) -> u64 {
    r.count("turns") + r.count("utterances") + r.count("phone_turns")
}

/// One point of the curve.
pub(super) struct Sample {
    elapsed_s: f64,
    rss_kib: Option<u64>,
    connected: u64,
    turns: u64,
    streams: u64,
    failures: u64,
}

impl Sample {
    pub(super) fn read(elapsed: Duration, target: &Target, live: &Report) -> Sample {
        Sample {
            elapsed_s: elapsed.as_secs_f64(),
            rss_kib: target.rss_kib(),
            connected: live
                .count("connected")
                .saturating_sub(live.count("dropped")),
            turns: answered(live),
            streams: live.count("streams_done"),
            failures: failures(live),
        }
    }

    pub(super) const HEADER: &'static str = "elapsed_s,rss_kib,connected,turns,streams,failures";

    pub(super) fn csv(&self) -> String {
        let rss = self.rss_kib.map_or(String::new(), |k| k.to_string());
        format!(
            "{:.1},{rss},{},{},{},{}",
            self.elapsed_s, self.connected, self.turns, self.streams, self.failures
        )
    }

    pub(super) fn print_header() {
        println!(
            "{:>9}  {:>11}  {:>9}  {:>9}  {:>8}  {:>8}",
            "elapsed", "server RSS", "connected", "turns", "streams", "failures"
        );
    }

    pub(super) fn print(&self) {
        println!(
            "{:>7.0} s  {:>11}  {:>9}  {:>9}  {:>8}  {:>8}",
            self.elapsed_s,
            mib(self.rss_kib),
            self.connected,
            self.turns,
            self.streams,
            self.failures
        );
    }
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or_else(|| "n/a".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0))
}

/// The least-squares slope of memory over time, in KiB per minute.
fn slope_kib_per_min(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let mean_t = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_m = points.iter().map(|p| p.1).sum::<f64>() / n;
    let (mut cov, mut var) = (0.0, 0.0);
    for (t, m) in points {
        cov += (t - mean_t) * (m - mean_m);
        var += (t - mean_t) * (t - mean_t);
    }
    (var > 0.0).then(|| cov / var * 60.0)
}

/// The memory after the warm-up: where it started, ended and peaked, and its slope.
pub(super) struct Memory {
    warmup_s: f64,
    start: Option<u64>,
    end: Option<u64>,
    max: Option<u64>,
    slope: Option<f64>,
    /// The fitted line's rise over the measured part, KiB.
    rise: Option<f64>,
}

impl Memory {
    pub(super) fn of(curve: &[Sample], warmup_s: f64) -> Memory {
        let settled: Vec<(f64, u64)> = curve
            .iter()
            .filter(|s| s.elapsed_s + 1e-6 >= warmup_s)
            .filter_map(|s| Some((s.elapsed_s, s.rss_kib?)))
            .collect();
        let points: Vec<(f64, f64)> = settled.iter().map(|&(t, k)| (t, k as f64)).collect();
        let slope = slope_kib_per_min(&points);
        let span_min = match (settled.first(), settled.last()) {
            (Some(a), Some(b)) => (b.0 - a.0) / 60.0,
            _ => 0.0,
        };
        Memory {
            warmup_s,
            start: settled.first().map(|s| s.1),
            end: settled.last().map(|s| s.1),
            max: settled.iter().map(|s| s.1).max(),
            slope,
            rise: slope.map(|s| s * span_min),
        }
    }

    fn flat(&self) -> Option<bool> {
        let (rise, start) = (self.rise?, self.start?);
        Some(rise < FLAT_SHARE * start as f64)
    }
}

fn goal(text: &str, met: bool) -> String {
    format!("{text} {}", if met { "MET" } else { "MISSED" })
}

fn of(done: u64, sent: u64) -> String {
    format!("{done} of {sent}")
}

fn quantiles(r: &Report, what: &str) -> String {
    let ms = |q| {
        r.quantile_ms(what, q)
            .map_or("n/a".into(), |v| format!("{v:.1} ms"))
    };
    format!("{} / {}", ms(0.5), ms(0.99))
}

/// Everything the summary shows.
pub(super) struct Summary<'a> {
    pub(super) mix: &'a Mix,
    pub(super) setup: &'a Report,
    pub(super) end: &'a Report,
    pub(super) memory: Memory,
    pub(super) rss_idle: Option<u64>,
    pub(super) rss_connected: Option<u64>,
    pub(super) cpu: Option<f64>,
    pub(super) minutes: f64,
}

impl Summary<'_> {
    pub(super) fn rows(&self) -> Vec<[String; 3]> {
        let (mix, setup, end, memory) = (self.mix, self.setup, self.end, &self.memory);
        let planned = (mix.gadgets() + mix.phones) as u64;
        let connected = setup.count("handshakes") + setup.count("connected");
        let lost = end.count("unanswered") + end.count("refused");
        let broken = end.count("aborted") + end.count("speech_short");
        let dropped = end.count("dropped");
        let per_conn = |rss: Option<u64>| match (self.rss_idle, rss) {
            (Some(idle), Some(all)) if connected > 0 => {
                format!(
                    "{:.1} KiB",
                    all.saturating_sub(idle) as f64 / connected as f64
                )
            }
            _ => "n/a".into(),
        };
        let mut rows = vec![
            [
                "devices connected".into(),
                of(connected, planned),
                goal("all", connected == planned && setup_failures(setup) == 0),
            ],
            ["  idle gadgets".into(), mix.idle.to_string(), String::new()],
            [
                "  typing gadgets".into(),
                mix.typing.to_string(),
                String::new(),
            ],
            [
                "  speaking gadgets".into(),
                mix.speaking.to_string(),
                String::new(),
            ],
            ["  phones".into(), mix.phones.to_string(), String::new()],
            [
                "connections dropped".into(),
                dropped.to_string(),
                goal("none", dropped == 0),
            ],
            [
                "connections held to the end".into(),
                end.count("held").to_string(),
                String::new(),
            ],
            [
                "heartbeats answered".into(),
                end.count("pongs").to_string(),
                String::new(),
            ],
            [
                "typed turns answered".into(),
                of(end.count("turns"), end.count("sent")),
                String::new(),
            ],
            [
                "  reply p50 / p99".into(),
                quantiles(end, "reply"),
                String::new(),
            ],
            [
                "voice turns answered".into(),
                of(end.count("utterances"), end.count("utterances_sent")),
                String::new(),
            ],
            [
                "  reply p50 / p99".into(),
                quantiles(end, "voice_reply"),
                String::new(),
            ],
            [
                "speech streams ended".into(),
                of(end.count("streams_done"), end.count("streams")),
                String::new(),
            ],
            [
                "  frames received".into(),
                format!("{} ({UTTERANCE_FRAMES} a stream)", end.count("frames")),
                String::new(),
            ],
            [
                "phone turns answered".into(),
                of(end.count("phone_turns"), end.count("phone_sent")),
                String::new(),
            ],
            [
                "  reply p50 / p99".into(),
                quantiles(end, "phone_reply"),
                String::new(),
            ],
            [
                "turns unanswered or refused".into(),
                lost.to_string(),
                goal("none", lost == 0),
            ],
            [
                "streams aborted or short".into(),
                broken.to_string(),
                goal("none", broken == 0),
            ],
            [
                "server RSS idle / connected".into(),
                format!("{} / {}", mib(self.rss_idle), mib(self.rss_connected)),
                String::new(),
            ],
            [
                "  per connection".into(),
                per_conn(self.rss_connected),
                String::new(),
            ],
            [
                format!("server RSS at {:.0} s (warm)", memory.warmup_s),
                mib(memory.start),
                String::new(),
            ],
            [
                format!("server RSS at {:.0} s (end)", self.minutes * 60.0),
                mib(memory.end),
                String::new(),
            ],
            [
                "server RSS max after warm-up".into(),
                mib(memory.max),
                String::new(),
            ],
            [
                "  per connection at the end".into(),
                per_conn(memory.end),
                String::new(),
            ],
        ];
        let slope = memory
            .slope
            .map_or("n/a".into(), |s| format!("{s:+.1} KiB/min"));
        let flat = memory.flat().map_or(String::new(), |met| {
            goal(
                &format!("fitted rise <{:.0}% of warm RSS", FLAT_SHARE * 100.0),
                met,
            )
        });
        rows.push(["memory slope after warm-up".into(), slope, flat]);
        let cpu = self.cpu.map_or("n/a".into(), |c| format!("{c:.0}%"));
        rows.push(["server CPU".into(), cpu, String::new()]);
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slope_of_a_line_is_found() {
        // 100 KiB more every minute.
        let points: Vec<(f64, f64)> = (0..10)
            .map(|i| (i as f64 * 30.0, 1000.0 + i as f64 * 50.0))
            .collect();
        let slope = slope_kib_per_min(&points).unwrap();
        assert!((slope - 100.0).abs() < 1e-9, "{slope}");
        assert_eq!(slope_kib_per_min(&points[..1]), None);
    }
}
