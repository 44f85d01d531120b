//! `soak`: Herald at the descriptor limit for minutes, with the demo agent, under a
//! steady mix: idle gadgets answering heartbeats, gadgets sending typed turns, gadgets
//! sending utterances that the agent plays back (speech), and phones sending text.
//! Every few seconds the bench reads the server's memory and the clients' counts; at
//! the end it fits a line to the memory after the warm-up and checks that nothing was
//! dropped: every connection held, every turn answered, every speech stream whole.
//!
//! Each client has one turn in flight at most and sends the next one a period after
//! the last (later, if the answer took longer), so a slow server shows as late turns
//! rather than as turns the demo agent cancels for newer ones. There is no baseline:
//! the figures are the server's against its own start.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use futures_util::{SinkExt, StreamExt};
use herald_gadget_proto::ServerMessage;
use herald_host::print_table;
use herald_mobile_proto::{ClientFrame, Text};
use herald_server::store::MAX_PHONES_PER_USER;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::time::sleep_until;
use tokio_tungstenite::tungstenite::Message;

use super::connect::{handshake_all, hold, Device};
use super::stats::Report;
use super::talk::{send_turn, Turns, UTTERANCE_FRAMES};
use super::worker::{Control, Failure, Job, Workers, Ws};
use super::{
    herald_target, machine, mobile, on_loopback, random_hex, share, BenchArgs, Load, Run, Target,
    HEARTBEAT_S, SETUP_LIMIT,
};

/// Descriptors the server keeps beyond its connections: the store, its listeners,
/// recordings being written and speech being read.
const SERVER_SPARE_FDS: u64 = 1000;
/// The server's inbox is kept small, so that it fills up within the warm-up and the
/// oldest recordings are pruned through the rest of the soak, as in a long-running home.
pub(super) const SERVER_CONFIG: &str = "[inbox]\nmax_mb = 16\n";
/// A turn not answered (and, for an utterance, not played back) within this is lost.
const TURN_LIMIT: Duration = Duration::from_secs(30);
/// The longest the workers may take to report their counts.
const SAMPLE_LIMIT: Duration = Duration::from_secs(60);
/// Memory is flat when the fitted line rises by less than this share of the starting
/// memory over the measured part of the run.
const FLAT_SHARE: f64 = 0.01;

#[derive(Debug, Args)]
pub struct SoakArgs {
    /// soak: minutes of load
    #[arg(long, default_value_t = 10.0)]
    minutes: f64,
    /// soak: percent of the devices that are gadgets sending typed turns
    #[arg(long, default_value_t = 10.0)]
    typing: f64,
    /// soak: percent that are gadgets sending utterances, which the agent plays back
    #[arg(long, default_value_t = 2.0)]
    speaking: f64,
    /// soak: phones sending text; one app token (one user) may have 32
    #[arg(long, default_value_t = MAX_PHONES_PER_USER)]
    phones: usize,
    /// soak: seconds from one turn of a client to its next
    #[arg(long, default_value_t = 10.0)]
    every: f64,
    /// soak: seconds between samples
    #[arg(long, default_value_t = 10.0)]
    sample: f64,
    /// soak: seconds of load before the memory counts as settled (at most half the run);
    /// an idle connection's queues take 32 heartbeats (160 s) to reach their size
    #[arg(long, default_value_t = 180.0)]
    warmup: f64,
    /// soak: also write the samples to this CSV file
    #[arg(long)]
    csv: Option<PathBuf>,
}

impl SoakArgs {
    fn check(&self) -> anyhow::Result<()> {
        if !(self.minutes > 0.0 && self.minutes <= 24.0 * 60.0) {
            bail!("--minutes must be between 0 and 1440");
        }
        if !(self.every > 0.0 && self.every <= 3600.0) {
            bail!("--every must be between 0 and 3600 seconds");
        }
        // Workers give up on a parent silent for half an hour.
        if !(self.sample >= 0.1 && self.sample <= 600.0) {
            bail!("--sample must be between 0.1 and 600 seconds");
        }
        if self.warmup.is_nan() || self.warmup < 0.0 {
            bail!("--warmup must not be negative");
        }
        let shares = [self.typing, self.speaking];
        if shares.iter().any(|p| p.is_nan() || *p < 0.0) || shares.iter().sum::<f64>() > 100.0 {
            bail!("--typing and --speaking are percentages adding up to 100 at most");
        }
        // The server refuses a user's phones beyond this; the bench has one user.
        if self.phones > MAX_PHONES_PER_USER {
            bail!("--phones: one app token may have {MAX_PHONES_PER_USER} phones at most");
        }
        Ok(())
    }

    fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.minutes * 60.0)
    }
}

/// As many devices as the server's descriptors allow: the clients are spread over
/// worker processes, the server holds them all.
pub(super) fn default_devices(fd_limit: u64) -> usize {
    fd_limit.saturating_sub(SERVER_SPARE_FDS).max(1) as usize
}

/// What a worker's clients do (or, in the parent, all of them).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Mix {
    pub idle: usize,
    pub typing: usize,
    pub speaking: usize,
    pub phones: usize,
    pub mobile_url: Option<String>,
    pub every_s: f64,
    /// Samples the parent takes before it ends the load.
    pub samples: u32,
}

impl Mix {
    fn of(devices: usize, args: &SoakArgs) -> Mix {
        let part = |percent: f64| (devices as f64 * percent / 100.0).round() as usize;
        // Rounding may overshoot by one; the idle gadgets take what is left.
        let phones = args.phones.min(devices);
        let speaking = part(args.speaking).min(devices - phones);
        let typing = part(args.typing).min(devices - phones - speaking);
        Mix {
            idle: devices - phones - speaking - typing,
            typing,
            speaking,
            phones,
            mobile_url: None,
            every_s: args.every,
            samples: 0,
        }
    }

    /// Worker `index`'s share of `parts`.
    fn share(&self, parts: usize, index: usize) -> Mix {
        Mix {
            idle: share(self.idle, parts, index),
            typing: share(self.typing, parts, index),
            speaking: share(self.speaking, parts, index),
            phones: share(self.phones, parts, index),
            ..self.clone()
        }
    }

    fn gadgets(&self) -> usize {
        self.idle + self.typing + self.speaking
    }

    fn describe(&self) -> String {
        format!(
            "{} idle gadgets, {} typing, {} speaking, {} phones",
            self.idle, self.typing, self.speaking, self.phones
        )
    }
}

// ---- worker side ----

/// A worker's counts, shared by its clients.
#[derive(Clone, Default)]
struct Tally(Arc<Mutex<Report>>);

impl Tally {
    fn with<T>(&self, f: impl FnOnce(&mut Report) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// A client is done: it held until the end, or was lost (and why).
    fn ended(&self, what: &str, pongs: u64, lost: Option<String>) {
        self.with(|r| {
            r.add("pongs", pongs);
            match lost {
                None => r.add("held", 1),
                Some(why) => {
                    r.add("dropped", 1);
                    r.error(format!("{what} dropped: {why}"));
                }
            }
        });
    }
}

/// A gadget sending a turn every `every` from `next` on: typed, or an utterance the
/// demo agent answers and plays back. Its turns go into the tally as they end.
async fn gadget(
    mut ws: Ws,
    voice: bool,
    mut next: Instant,
    every: Duration,
    tally: Tally,
    mut stop: watch::Receiver<bool>,
) {
    let mut turns = Turns::default();
    let (mut sent, mut pongs) = (0u64, 0u64);
    // The turn in flight: its deadline, and whether its speech is still to end.
    let mut deadline: Option<Instant> = None;
    let mut hearing = false;
    let mut frames = 0u32;
    let mut stopping = false;
    let lost = loop {
        let busy = !turns.pending.is_empty() || hearing;
        if !busy {
            if deadline.take().is_some() {
                tally.with(|r| r.merge(std::mem::take(&mut turns.report)));
            }
            if stopping {
                break None;
            }
        }
        let wake = deadline.filter(|_| busy).unwrap_or(next);
        tokio::select! {
            _ = stop.changed(), if !stopping => stopping = true,
            _ = sleep_until(wake.into()) => {
                if busy {
                    turns.pending.clear();
                    hearing = false;
                    turns.report.add("unanswered", 1);
                    turns.report.error(format!("a turn unanswered after {} s", TURN_LIMIT.as_secs()));
                    continue;
                }
                sent += 1;
                let stream = voice.then(|| u8::try_from(sent % 255 + 1).unwrap_or(1));
                if let Err(err) = send_turn(&mut ws, sent, stream).await {
                    break Some(err);
                }
                turns.sent(voice);
                hearing = voice;
                deadline = Some(Instant::now() + TURN_LIMIT);
                next = (next + every).max(Instant::now());
            }
            frame = ws.next() => match frame {
                Some(Ok(Message::Text(text))) => match ServerMessage::decode(&text) {
                    Ok(ServerMessage::AudioStart(_)) => {
                        frames = 0;
                        turns.report.add("streams", 1);
                    }
                    Ok(ServerMessage::AudioEnd(_)) => {
                        hearing = false;
                        turns.report.add("streams_done", 1);
                        if frames < u32::from(UTTERANCE_FRAMES) {
                            turns.report.add("speech_short", 1);
                            turns.report.error(format!("speech of {frames} frames"));
                        }
                    }
                    Ok(ServerMessage::AudioAbort(_)) => {
                        hearing = false;
                        turns.report.add("aborted", 1);
                    }
                    _ => {
                        let refused = turns.report.count("refused");
                        let pong = turns.on_text(&text, false);
                        // A refused utterance is not played back either.
                        if turns.report.count("refused") > refused {
                            hearing = false;
                        }
                        if let Some(pong) = pong {
                            if let Err(err) = ws.send(Message::Text(pong.into())).await {
                                break Some(err.to_string());
                            }
                            pongs += 1;
                        }
                    }
                },
                Some(Ok(Message::Binary(_))) => {
                    frames += 1;
                    turns.report.add("frames", 1);
                }
                Some(Ok(_)) => {}
                Some(Err(err)) => break Some(err.to_string()),
                None => break Some("connection closed".into()),
            },
        }
    };
    if lost.is_none() {
        let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(None)).await;
    }
    // What a lost connection left in flight was not answered.
    let unanswered = u64::from(!turns.pending.is_empty() || hearing);
    turns.report.add("unanswered", unanswered);
    tally.with(|r| r.merge(turns.report));
    let what = if voice {
        "speaking gadget"
    } else {
        "typing gadget"
    };
    tally.ended(what, pongs, lost);
}

/// A phone sending a message every `every` from `next` on and waiting for the final
/// reply; the server's WebSocket pings are answered as frames are read.
async fn phone(
    mut ws: Ws,
    mut next: Instant,
    every: Duration,
    tally: Tally,
    mut stop: watch::Receiver<bool>,
) {
    let mut sent = 0u32;
    let lost = loop {
        tokio::select! {
            _ = stop.changed() => break None,
            _ = sleep_until(next.into()) => {
                sent += 1;
                let text = ClientFrame::Text(Text {
                    id: format!("m{sent}"),
                    text: format!("message {sent}"),
                    reply_to: None,
                });
                if let Err(err) = ws.send(Message::Text(text.encode().into())).await {
                    break Some(err.to_string());
                }
                tally.with(|r| r.add("phone_sent", 1));
                let t0 = Instant::now();
                let answer = tokio::time::timeout(TURN_LIMIT, mobile::reply(&mut ws, false, 1)).await;
                match answer {
                    Ok(Ok(())) => tally.with(|r| {
                        r.latency("phone_reply", t0.elapsed());
                        r.add("phone_turns", 1);
                    }),
                    Ok(Err(Failure::Io(why))) => break Some(why),
                    Ok(Err(failure)) => tally.with(|r| {
                        r.add("unanswered", 1);
                        r.error(format!("phone: {failure}"));
                    }),
                    Err(_) => tally.with(|r| {
                        r.add("unanswered", 1);
                        r.error("phone: no reply within the turn limit");
                    }),
                }
                next = (next + every).max(Instant::now());
            }
            frame = ws.next() => match frame {
                Some(Ok(_)) => {}
                Some(Err(err)) => break Some(err.to_string()),
                None => break Some("connection closed".into()),
            },
        }
    };
    if lost.is_none() {
        let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(None)).await;
    }
    tally.ended("phone", 0, lost);
}

/// The worker's side: connect the gadgets and phones; start the load; report the
/// counts at every sample; at the last instruction stop, let the turns in flight end,
/// and report everything.
pub(super) async fn work(job: Job, mut control: Control) -> anyhow::Result<()> {
    let mix = job.soak.clone().context("a soak job without its mix")?;
    let devices = Device::many(mix.gadgets())?;
    control.go().await?;
    let (mut setup, gadgets) =
        handshake_all(&job, &devices, job.enroll_concurrency, true, "handshakes").await;
    let phones = match &mix.mobile_url {
        Some(url) if mix.phones > 0 => {
            let phone_job = Job {
                url: url.clone(),
                ..job.clone()
            };
            let tag = random_hex(6)?;
            mobile::connect_phones(&phone_job, &tag, mix.phones, &mut setup).await
        }
        _ => Vec::new(),
    };
    control.report(setup)?;

    control.go().await?;
    let tally = Tally::default();
    let connected = (gadgets.len() + phones.len()) as u64;
    tally.with(|r| r.add("connected", connected));
    let (stop, stopped) = watch::channel(false);
    let every = Duration::from_secs_f64(mix.every_s);
    // Spread the clients' turns evenly over one period, so the load is steady.
    let active = (mix.typing + mix.speaking + mix.phones).max(1);
    let start = Instant::now();
    let first = |i: usize| start + every.mul_f64(i as f64 / active as f64);
    let mut clients = Vec::new();
    for (index, ws) in gadgets {
        let (tally, stopped) = (tally.clone(), stopped.clone());
        clients.push(if index < mix.typing + mix.speaking {
            let voice = index >= mix.typing;
            tokio::spawn(gadget(ws, voice, first(index), every, tally, stopped))
        } else {
            tokio::spawn(async move {
                let (pongs, lost) = hold(ws, stopped).await;
                tally.ended("idle gadget", pongs, lost);
            })
        });
    }
    let offset = mix.typing + mix.speaking;
    for (i, ws) in phones.into_iter().enumerate() {
        let (tally, stopped) = (tally.clone(), stopped.clone());
        clients.push(tokio::spawn(phone(
            ws,
            first(offset + i),
            every,
            tally,
            stopped,
        )));
    }
    control.report(Report::default())?;

    for _ in 0..mix.samples {
        control.go().await?;
        control.report(tally.with(|r| r.without_samples()))?;
    }
    control.go().await?;
    let _ = stop.send(true);
    for client in clients {
        if let Err(err) = client.await {
            tally.with(|r| r.error(err));
        }
    }
    control.report(tally.with(std::mem::take))?;
    Ok(())
}

// ---- parent side ----

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
struct Sample {
    elapsed_s: f64,
    rss_kib: Option<u64>,
    connected: u64,
    turns: u64,
    streams: u64,
    failures: u64,
}

impl Sample {
    fn read(elapsed: Duration, target: &Target, live: &Report) -> Sample {
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

    const HEADER: &'static str = "elapsed_s,rss_kib,connected,turns,streams,failures";

    fn csv(&self) -> String {
        let rss = self.rss_kib.map_or(String::new(), |k| k.to_string());
        format!(
            "{:.1},{rss},{},{},{},{}",
            self.elapsed_s, self.connected, self.turns, self.streams, self.failures
        )
    }

    fn print_header() {
        println!(
            "{:>9}  {:>11}  {:>9}  {:>9}  {:>8}  {:>8}",
            "elapsed", "server RSS", "connected", "turns", "streams", "failures"
        );
    }

    fn print(&self) {
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
struct Memory {
    warmup_s: f64,
    start: Option<u64>,
    end: Option<u64>,
    max: Option<u64>,
    slope: Option<f64>,
    /// The fitted line's rise over the measured part, KiB.
    rise: Option<f64>,
}

impl Memory {
    fn of(curve: &[Sample], warmup_s: f64) -> Memory {
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
struct Summary<'a> {
    mix: &'a Mix,
    setup: &'a Report,
    end: &'a Report,
    memory: Memory,
    rss_idle: Option<u64>,
    rss_connected: Option<u64>,
    cpu: Option<f64>,
    minutes: f64,
}

impl Summary<'_> {
    fn rows(&self) -> Vec<[String; 3]> {
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

pub(super) fn run(data_dir: Option<&Path>, args: &BenchArgs) -> anyhow::Result<()> {
    let soak = &args.soak;
    soak.check()?;
    let fd_limit = herald_host::raise_fd_limit();
    let mut run = Run::new(args, Load::Soak, fd_limit)?;
    run.duration = soak.duration();
    let mut mix = Mix::of(run.clients, soak);
    let (target, _server, info) = herald_target(data_dir, args, Load::Soak)?;
    if mix.phones > 0 {
        let info =
            info.context("phones need the server's mobile URL: give --data-dir, or --phones 0")?;
        mix.mobile_url = Some(on_loopback(&info.mobile_url)?);
        if target.tokens.is_empty() {
            bail!("phones need the app token: --token or MOBILE_TOKEN");
        }
    }
    let length = run.duration.as_secs_f64();
    mix.samples = (length / soak.sample).ceil().max(1.0) as u32;
    let warmup_s = soak.warmup.min(length / 2.0);
    let mut jobs = run.jobs(&target);
    let processes = jobs.len();
    for (index, job) in jobs.iter_mut().enumerate() {
        let mine = mix.share(processes, index);
        job.clients = mine.gadgets() + mine.phones;
        job.soak = Some(mine);
    }
    let mut csv = match &soak.csv {
        Some(path) => {
            let mut file = std::fs::File::create(path)
                .with_context(|| format!("cannot write {}", path.display()))?;
            writeln!(file, "{}", Sample::HEADER)?;
            Some(file)
        }
        None => None,
    };

    println!("machine: {}", machine());
    println!(
        "herald bench soak: {} devices ({}) in {} processes, {} min, a turn every {} s per \
         client, heartbeat {HEARTBEAT_S} s, a sample every {} s; Herald at {}",
        run.clients,
        mix.describe(),
        processes,
        soak.minutes,
        soak.every,
        soak.sample,
        target.url
    );
    let mut workers = Workers::spawn(jobs)?;
    let rss_idle = target.rss_kib();
    let setup = workers.phase("connecting", SETUP_LIMIT)?;
    let rss_connected = target.rss_kib();
    eprintln!(
        "connected {} of {} in {:.1} s",
        setup.count("handshakes") + setup.count("connected"),
        run.clients,
        setup.elapsed_s
    );
    workers.phase("starting", SAMPLE_LIMIT)?;
    let started = Instant::now();
    let cpu_start = target.cpu_seconds();
    Sample::print_header();
    let mut curve = Vec::new();
    for k in 1..=mix.samples {
        let at = Duration::from_secs_f64((soak.sample * f64::from(k)).min(length));
        std::thread::sleep((started + at).saturating_duration_since(Instant::now()));
        let live = workers.phase("sampling", SAMPLE_LIMIT)?;
        let point = Sample::read(started.elapsed(), &target, &live);
        point.print();
        if let Some(file) = csv.as_mut() {
            writeln!(file, "{}", point.csv())?;
            file.flush()?;
        }
        curve.push(point);
    }
    let cpu = cpu_start
        .zip(target.cpu_seconds())
        .map(|(a, b)| (b - a) / started.elapsed().as_secs_f64() * 100.0);
    let end = workers.phase("finishing", TURN_LIMIT + SAMPLE_LIMIT)?;
    drop(workers);

    let summary = Summary {
        mix: &mix,
        setup: &setup,
        end: &end,
        memory: Memory::of(&curve, warmup_s),
        rss_idle,
        rss_connected,
        cpu,
        minutes: soak.minutes,
    };
    let rows = summary.rows();
    print_table(&["METRIC", "VALUE", "GOAL"], &rows);
    let errors: Vec<String> = [("connecting", &setup), ("load", &end)]
        .iter()
        .flat_map(|(phase, r)| {
            r.errors()
                .map(move |(m, n)| format!("  {phase}: {m} (x{n})"))
        })
        .collect();
    if !errors.is_empty() {
        println!("errors seen by the clients:");
        for line in errors {
            println!("{line}");
        }
    }
    let missed = rows.iter().filter(|r| r[2].ends_with("MISSED")).count();
    if missed > 0 {
        println!("{missed} goal(s) missed");
    }
    Ok(())
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

    #[test]
    fn the_mix_adds_up() {
        let args = SoakArgs {
            minutes: 1.0,
            typing: 33.4,
            speaking: 33.4,
            phones: 32,
            every: 10.0,
            sample: 10.0,
            warmup: 0.0,
            csv: None,
        };
        for devices in [1, 2, 3, 7, 19000] {
            let mix = Mix::of(devices, &args);
            assert_eq!(mix.gadgets() + mix.phones, devices);
            let total: usize = (0..3)
                .map(|w| {
                    let m = mix.share(3, w);
                    m.gadgets() + m.phones
                })
                .sum();
            assert_eq!(total, devices);
        }
    }
}
