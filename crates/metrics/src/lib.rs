//! Counters for `/metrics` (Prometheus text format) on the admin listener.
//!
//! Per-frame counters are plain atomics, so counting costs no lock on the hot path;
//! events that happen once per connection (handshakes, errors) go into small maps behind
//! a mutex, which is fine at that rate.
//!
//! [`Metrics`] is the one object every hub, the router and the admin API share, so it
//! also carries the console's [`Activity`]: recent conversation events and the live
//! event bus (see [`activity`]).
//!
//! A crate of its own so the admin API (`herald-admin`) reads what the server counts
//! without linking the server.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod activity;
pub mod clock;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use herald_port::Platform;
use serde::Serialize;

use crate::activity::Activity;

/// Frames and bytes through one transport.
#[derive(Default)]
pub struct Traffic {
    frames_in: AtomicU64,
    frames_out: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
}

impl Traffic {
    pub fn inbound(&self, bytes: usize) {
        self.frames_in.fetch_add(1, Ordering::Relaxed);
        self.bytes_in.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub fn outbound(&self, bytes: usize) {
        self.frames_out.fetch_add(1, Ordering::Relaxed);
        self.bytes_out.fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

/// A histogram with fixed upper bounds, in seconds.
pub struct Histogram {
    bounds: &'static [f64],
    buckets: Vec<AtomicU64>,
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            buckets: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_micros: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, value: Duration) {
        let seconds = value.as_secs_f64();
        for (bound, bucket) in self.bounds.iter().zip(&self.buckets) {
            if seconds <= *bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(value.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }
}

/// Audio frame lateness against the real-time schedule.
const LATENESS_BOUNDS: &[f64] = &[0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0];

pub struct Metrics {
    pub gadget: Traffic,
    pub mobile: Traffic,
    pub audio_lateness: Histogram,
    turns: [AtomicU64; 2],
    /// (platform, outcome) → count; the outcome is `ok` or a refusal code.
    handshakes: Mutex<BTreeMap<(Platform, &'static str), u64>>,
    /// (platform, code) → count of errors sent to clients after the handshake.
    errors: Mutex<BTreeMap<(Platform, &'static str), u64>>,
    /// What the console shows of conversations, and its live events.
    pub activity: Activity,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            gadget: Traffic::default(),
            mobile: Traffic::default(),
            audio_lateness: Histogram::new(LATENESS_BOUNDS),
            turns: Default::default(),
            handshakes: Mutex::default(),
            errors: Mutex::default(),
            activity: Activity::default(),
        }
    }
}

/// The main figures of one platform, for the console's server page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlatformStats {
    pub online: usize,
    pub turns: u64,
    pub handshakes_ok: u64,
    pub handshakes_refused: u64,
    pub frames_in: u64,
    pub frames_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub errors: u64,
}

/// What `/v1/stats` answers: the figures of `/metrics` that a person reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stats {
    pub gadget: PlatformStats,
    pub mobile: PlatformStats,
    pub ota: Vec<(String, u64)>,
    pub ota_bytes_sent: u64,
}

/// Values that live elsewhere and are read at scrape time.
pub struct Gauges {
    pub gadgets_online: usize,
    pub phones_online: usize,
    /// Firmware updates by status.
    pub ota: Vec<(String, u64)>,
    pub ota_bytes_sent: u64,
}

fn index(platform: Platform) -> usize {
    match platform {
        Platform::Gadget => 0,
        Platform::Mobile => 1,
    }
}

fn bump(map: &Mutex<BTreeMap<(Platform, &'static str), u64>>, key: (Platform, &'static str)) {
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    *map.entry(key).or_default() += 1;
}

impl Metrics {
    pub fn traffic(&self, platform: Platform) -> &Traffic {
        match platform {
            Platform::Gadget => &self.gadget,
            Platform::Mobile => &self.mobile,
        }
    }

    pub fn handshake(&self, platform: Platform, outcome: &'static str) {
        bump(&self.handshakes, (platform, outcome));
    }

    pub fn error(&self, platform: Platform, code: &'static str) {
        bump(&self.errors, (platform, code));
    }

    pub fn turn(&self, platform: Platform) {
        self.turns[index(platform)].fetch_add(1, Ordering::Relaxed);
    }

    /// The main figures, as JSON for the console.
    pub fn stats(&self, gauges: &Gauges) -> Stats {
        let handshakes = self.handshakes.lock().unwrap_or_else(|e| e.into_inner());
        let errors = self.errors.lock().unwrap_or_else(|e| e.into_inner());
        let of = |platform: Platform, online: usize| {
            let t = self.traffic(platform);
            let (mut ok, mut refused) = (0, 0);
            for ((p, outcome), n) in handshakes.iter() {
                if *p == platform {
                    match *outcome {
                        "ok" => ok += n,
                        _ => refused += n,
                    }
                }
            }
            PlatformStats {
                online,
                turns: self.turns[index(platform)].load(Ordering::Relaxed),
                handshakes_ok: ok,
                handshakes_refused: refused,
                frames_in: t.frames_in.load(Ordering::Relaxed),
                frames_out: t.frames_out.load(Ordering::Relaxed),
                bytes_in: t.bytes_in.load(Ordering::Relaxed),
                bytes_out: t.bytes_out.load(Ordering::Relaxed),
                errors: errors
                    .iter()
                    .filter(|((p, _), _)| *p == platform)
                    .map(|(_, n)| n)
                    .sum(),
            }
        };
        Stats {
            gadget: of(Platform::Gadget, gauges.gadgets_online),
            mobile: of(Platform::Mobile, gauges.phones_online),
            ota: gauges.ota.clone(),
            ota_bytes_sent: gauges.ota_bytes_sent,
        }
    }

    /// The Prometheus text exposition of everything.
    pub fn render(&self, gauges: &Gauges) -> String {
        let mut out = String::new();
        let platforms = [Platform::Gadget, Platform::Mobile];

        header(&mut out, "herald_connections", "gauge", "Live connections.");
        for (platform, n) in [
            (Platform::Gadget, gauges.gadgets_online),
            (Platform::Mobile, gauges.phones_online),
        ] {
            let _ = writeln!(out, "herald_connections{{platform=\"{platform}\"}} {n}");
        }

        header(
            &mut out,
            "herald_handshakes_total",
            "counter",
            "Handshakes by outcome.",
        );
        for ((platform, outcome), n) in self
            .handshakes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            let _ = writeln!(
                out,
                "herald_handshakes_total{{platform=\"{platform}\",outcome=\"{outcome}\"}} {n}"
            );
        }

        header(
            &mut out,
            "herald_turns_total",
            "counter",
            "Agent turns started.",
        );
        for platform in platforms {
            let n = self.turns[index(platform)].load(Ordering::Relaxed);
            let _ = writeln!(out, "herald_turns_total{{platform=\"{platform}\"}} {n}");
        }

        header(
            &mut out,
            "herald_frames_total",
            "counter",
            "WebSocket frames.",
        );
        for platform in platforms {
            let t = self.traffic(platform);
            for (direction, n) in [("in", &t.frames_in), ("out", &t.frames_out)] {
                let n = n.load(Ordering::Relaxed);
                let _ = writeln!(
                    out,
                    "herald_frames_total{{platform=\"{platform}\",direction=\"{direction}\"}} {n}"
                );
            }
        }
        header(
            &mut out,
            "herald_bytes_total",
            "counter",
            "WebSocket payload bytes.",
        );
        for platform in platforms {
            let t = self.traffic(platform);
            for (direction, n) in [("in", &t.bytes_in), ("out", &t.bytes_out)] {
                let n = n.load(Ordering::Relaxed);
                let _ = writeln!(
                    out,
                    "herald_bytes_total{{platform=\"{platform}\",direction=\"{direction}\"}} {n}"
                );
            }
        }

        let h = &self.audio_lateness;
        header(
            &mut out,
            "herald_audio_lateness_seconds",
            "histogram",
            "How late audio frames left against the real-time schedule.",
        );
        for (bound, bucket) in h.bounds.iter().zip(&h.buckets) {
            let n = bucket.load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "herald_audio_lateness_seconds_bucket{{le=\"{bound}\"}} {n}"
            );
        }
        let count = h.count.load(Ordering::Relaxed);
        let sum = h.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(
            out,
            "herald_audio_lateness_seconds_bucket{{le=\"+Inf\"}} {count}"
        );
        let _ = writeln!(out, "herald_audio_lateness_seconds_sum {sum}");
        let _ = writeln!(out, "herald_audio_lateness_seconds_count {count}");

        header(
            &mut out,
            "herald_ota_updates",
            "gauge",
            "Firmware updates by status.",
        );
        for (status, n) in &gauges.ota {
            let _ = writeln!(out, "herald_ota_updates{{status=\"{status}\"}} {n}");
        }
        header(
            &mut out,
            "herald_ota_bytes_sent",
            "gauge",
            "Firmware bytes sent by updates on record.",
        );
        let _ = writeln!(out, "herald_ota_bytes_sent {}", gauges.ota_bytes_sent);

        header(
            &mut out,
            "herald_errors_total",
            "counter",
            "Errors sent to clients, by code.",
        );
        for ((platform, code), n) in self.errors.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let _ = writeln!(
                out,
                "herald_errors_total{{platform=\"{platform}\",code=\"{code}\"}} {n}"
            );
        }
        out
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let m = Metrics::default();
        m.gadget.inbound(10);
        m.gadget.outbound(20);
        m.handshake(Platform::Gadget, "ok");
        m.handshake(Platform::Gadget, "ok");
        m.handshake(Platform::Mobile, "auth_failed");
        m.error(Platform::Mobile, "too_big");
        m.turn(Platform::Gadget);
        m.audio_lateness.observe(Duration::from_millis(3));
        m.audio_lateness.observe(Duration::from_millis(30));
        let text = m.render(&Gauges {
            gadgets_online: 2,
            phones_online: 1,
            ota: vec![("done".into(), 1)],
            ota_bytes_sent: 4096,
        });
        for line in [
            "herald_connections{platform=\"gadget\"} 2",
            "herald_handshakes_total{platform=\"gadget\",outcome=\"ok\"} 2",
            "herald_handshakes_total{platform=\"mobile\",outcome=\"auth_failed\"} 1",
            "herald_frames_total{platform=\"gadget\",direction=\"in\"} 1",
            "herald_bytes_total{platform=\"gadget\",direction=\"out\"} 20",
            "herald_turns_total{platform=\"gadget\"} 1",
            "herald_audio_lateness_seconds_bucket{le=\"0.005\"} 1",
            "herald_audio_lateness_seconds_bucket{le=\"0.05\"} 2",
            "herald_audio_lateness_seconds_count 2",
            "herald_ota_updates{status=\"done\"} 1",
            "herald_errors_total{platform=\"mobile\",code=\"too_big\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
        }
        let stats = m.stats(&Gauges {
            gadgets_online: 2,
            phones_online: 1,
            ota: vec![],
            ota_bytes_sent: 0,
        });
        assert_eq!(
            stats.gadget,
            PlatformStats {
                online: 2,
                turns: 1,
                handshakes_ok: 2,
                handshakes_refused: 0,
                frames_in: 1,
                frames_out: 1,
                bytes_in: 10,
                bytes_out: 20,
                errors: 0,
            }
        );
        assert_eq!(
            (stats.mobile.handshakes_refused, stats.mobile.errors),
            (1, 1)
        );
    }
}
