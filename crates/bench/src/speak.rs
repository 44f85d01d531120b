//! `speak`: every connected gadget receives the same speech at once, and the bench
//! checks the frames against the real-time schedule.
//!
//! Herald is asked through its admin API (`/v1/deliver`, a voice file, as `herald send`
//! does), so the whole speech path runs: decode, resample to the device's rate, pace,
//! write. The bare baseline is asked with a text frame and paces frames of the same
//! size on the same schedule. Each gadget judges what arrives the way a device's
//! jitter buffer would: from the first frame, frame `n` is due when the protocol's
//! pacing rule lets it go (at most 0.5 s ahead of playing), and a frame past its
//! playing time starts playback afresh ([`Pacer`] is that rule). The schedule starts
//! with the first frame, as playback does; the wait for it after `audio.start` is
//! reported apart. Lateness is arrival minus due; a burst is the longest run of frames
//! arriving together (closer than a quarter frame apart): 13 when the lead goes out.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use herald_admin_api::{AdminClient, DeliverKind, DeliverMedia, DeliverRequest, Delivered};
use herald_gadget_proto::{limits, DeviceMessage, Pong, ServerMessage};
use herald_media::pacing::Pacer;
use herald_port::Chat;
use tokio_tungstenite::tungstenite::Message;

use super::connect::{connect_all, SPEECH_RATE};
use super::stats::{Goal, Report, Table, Unit};
use super::worker::{Control, Job, Ws};
use super::{Loaded, Run};

pub(super) const FRAME: Duration = Duration::from_millis(limits::AUDIO_FRAME_MS as u64);
pub(super) const LEAD: Duration = Duration::from_millis(limits::AUDIO_MAX_LEAD_MS as u64);
/// Bytes of one frame's PCM at the gadgets' rate.
pub(super) const FRAME_BYTES: usize =
    (SPEECH_RATE as usize * 2) * limits::AUDIO_FRAME_MS as usize / 1000;
/// Time past the speech's length for the last frames to arrive.
const GRACE: Duration = Duration::from_secs(10);
/// Requests to the admin API in flight at once, per worker.
const TRIGGERS: usize = 4;
/// The goals: lateness at p99, and the burst the 0.5 s lead allows (13 frames).
const GOAL_P99_MS: f64 = 20.0;
const GOAL_BURST: u32 = 13;
const GOAL_STREAMS: usize = 2000;

/// A WAV file of `length` of a quiet tone at the gadgets' rate, in `dir`.
pub(super) fn write_speech(dir: &std::path::Path, length: Duration) -> anyhow::Result<PathBuf> {
    let samples = (length.as_secs_f64() * f64::from(SPEECH_RATE)) as usize;
    let pcm: Vec<u8> = (0..samples)
        .flat_map(|i| {
            let t = i as f64 / f64::from(SPEECH_RATE);
            let sample = (f64::sin(t * 440.0 * std::f64::consts::TAU) * 3000.0) as i16;
            sample.to_le_bytes()
        })
        .collect();
    let path = dir.join("speech.wav");
    herald_media::wav::write_wav(&path, SPEECH_RATE, &pcm)?;
    Ok(path)
}

/// The request that makes the bare baseline speak `frames` frames.
pub(super) fn bare_request(frames: u64) -> String {
    format!("speak {frames}")
}

/// The frames of one stream as they arrive.
struct Stream {
    /// When `audio.start` arrived.
    announced: Instant,
    /// The schedule, from the first frame: a device starts playing when audio arrives.
    pacer: Option<(Pacer, Instant)>,
    last: Option<Instant>,
    /// Frames in the current run of frames arriving together, and the longest run.
    run: u32,
    burst: u32,
}

impl Stream {
    fn new(now: Instant) -> Stream {
        Stream {
            announced: now,
            pacer: None,
            last: None,
            run: 0,
            burst: 0,
        }
    }

    fn frame(&mut self, now: Instant, report: &mut Report) {
        let (pacer, start) = self.pacer.get_or_insert_with(|| {
            report.latency("first_frame", now.duration_since(self.announced));
            (Pacer::new(now, FRAME, LEAD), now)
        });
        let due = pacer.next_send_at().max(*start);
        report.latency("lateness", now.saturating_duration_since(due));
        report.add("frames", 1);
        pacer.frame_sent(now);
        // Paced frames arrive a frame apart; frames much closer than that came at once.
        let together = self.last.is_some_and(|t| now.duration_since(t) < FRAME / 4);
        self.run = if together { self.run + 1 } else { 1 };
        self.burst = self.burst.max(self.run);
        self.last = Some(now);
    }
}

/// Listen to one gadget until its speech ends (`audio.end`, or every frame from the
/// baseline) or `give_up`.
async fn listen(mut ws: Ws, bare: bool, frames: u64, give_up: Instant) -> Report {
    let mut report = Report::default();
    if bare {
        let request = Message::Text(bare_request(frames).into());
        if let Err(err) = ws.send(request).await {
            report.error(err);
            return report;
        }
    }
    let mut stream: Option<Stream> = None;
    let mut received = 0u64;
    loop {
        let next = match tokio::time::timeout_at(give_up.into(), ws.next()).await {
            Ok(next) => next,
            Err(_) => {
                report.add("unfinished", 1);
                break;
            }
        };
        let now = Instant::now();
        match next {
            Some(Ok(Message::Text(text))) => {
                let msg = (!bare).then(|| ServerMessage::decode(&text).ok()).flatten();
                let starts = bare || matches!(msg, Some(ServerMessage::AudioStart(_)));
                match msg {
                    Some(ServerMessage::AudioEnd(_)) => {
                        report.add("ended", 1);
                        break;
                    }
                    Some(ServerMessage::AudioAbort(_)) => {
                        report.add("aborted", 1);
                        break;
                    }
                    Some(ServerMessage::Ping(ping)) => {
                        let pong = DeviceMessage::Pong(Pong { ts: ping.ts }).encode();
                        if let Err(err) = ws.send(Message::Text(pong.into())).await {
                            report.error(err);
                            break;
                        }
                    }
                    _ if starts && stream.is_none() => {
                        stream = Some(Stream::new(now));
                        report.add("streams", 1);
                    }
                    _ => {}
                }
            }
            Some(Ok(Message::Binary(_))) => {
                let Some(stream) = stream.as_mut() else {
                    report.error("audio before audio.start");
                    continue;
                };
                stream.frame(now, &mut report);
                received += 1;
                if bare && received == frames {
                    report.add("ended", 1);
                    break;
                }
            }
            Some(Ok(_)) => {}
            Some(Err(err)) => {
                report.error(err);
                break;
            }
            None => {
                report.error("connection closed");
                break;
            }
        }
    }
    if let Some(stream) = stream {
        report.sample("burst", stream.burst);
        report.add("over_burst", u64::from(stream.burst > GOAL_BURST));
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(None)).await;
    report
}

/// Ask Herald to speak `voice` on each gadget, a few requests at a time.
async fn trigger(admin: PathBuf, voice: PathBuf, ids: Vec<String>, report: &mut Report) {
    let chunk = ids.len().div_ceil(TRIGGERS).max(1);
    let calls = ids.chunks(chunk).map(|ids| {
        let (admin, voice, ids) = (admin.clone(), voice.clone(), ids.to_vec());
        tokio::task::spawn_blocking(move || {
            let client = AdminClient::connect(&admin)?;
            for id in ids {
                let request = DeliverRequest {
                    chat: Chat::gadget(id),
                    text: None,
                    media: vec![DeliverMedia {
                        path: voice.clone(),
                        kind: Some(DeliverKind::Voice),
                    }],
                };
                let _: Delivered = client.post("/v1/deliver", &request)?;
            }
            anyhow::Ok(())
        })
    });
    for call in futures_util::future::join_all(calls).await {
        match call {
            Ok(Ok(())) => {}
            Ok(Err(err)) => report.error(format!("deliver: {err:#}")),
            Err(err) => report.error(err),
        }
    }
}

/// The worker's side: connect every gadget, then have them all spoken to at once.
pub(super) async fn work(job: Job, mut control: Control) -> anyhow::Result<()> {
    let (devices, open) = connect_all(&job, &mut control).await?;
    let frames = (job.duration().as_millis() / FRAME.as_millis()) as u64;
    let give_up = Instant::now() + job.duration() + GRACE;
    let ids: Vec<String> = open.iter().map(|(i, _)| devices[*i].id.clone()).collect();
    let listeners: Vec<_> = open
        .into_iter()
        .map(|(_, ws)| tokio::spawn(listen(ws, job.bare, frames, give_up)))
        .collect();
    let mut report = Report::default();
    let started = Instant::now();
    match (&job.admin, &job.voice, job.bare) {
        (_, _, true) => {}
        (Some(admin), Some(voice), false) => {
            trigger(admin.clone(), voice.clone(), ids, &mut report).await;
        }
        _ => anyhow::bail!("speak needs Herald's admin API and a voice file"),
    }
    report.elapsed_s = started.elapsed().as_secs_f64();
    for listener in listeners {
        if let Ok(part) = listener.await {
            report.merge(part);
        }
    }
    control.report(report)?;
    Ok(())
}

pub(super) fn tabulate(run: &Run, herald: &Loaded, bare: &Loaded, table: &mut Table) {
    let (h, b) = Loaded::start_table("gadgets connected", "handshakes", herald, bare, table);
    // The goals are for 2000 streams; smaller runs only show the figures.
    let judged = run.clients >= GOAL_STREAMS;
    table.count("streams started", h, b, "streams");
    // Streams that start late or never end were not concurrent, whatever their frames'
    // lateness once they ran.
    let all_at_once = h.count("ended") as usize == run.clients
        && h.quantile_ms("first_frame", 0.99)
            .is_some_and(|ms| ms < LEAD.as_secs_f64() * 1000.0);
    let ended = |r: &Report| Some(r.count("ended") as f64);
    let goal = judged.then(|| Goal::new("all, starting within 0.5 s", all_at_once));
    table.row("  ended", Unit::Count, ended(h), ended(b), goal);
    let lost = |r: &Report| Some((r.count("aborted") + r.count("unfinished")) as f64);
    table.row(
        "  aborted or unfinished",
        Unit::Count,
        lost(h),
        lost(b),
        None,
    );
    table.count("frames received", h, b, "frames");
    let asked = Some(h.elapsed_s * 1000.0);
    table.row(
        "  time to request them all",
        Unit::Millis,
        asked,
        None,
        None,
    );
    table.quantiles(
        ["first frame after audio.start p50", "  p99"],
        h,
        b,
        "first_frame",
    );
    table.latency("frame lateness p50", h, b, "lateness", 0.5);
    let p99 = h.quantile_ms("lateness", 0.99);
    let goal = p99.filter(|_| judged).map(|ms| {
        Goal::new(
            format!("<{GOAL_P99_MS:.0} ms at {GOAL_STREAMS}"),
            ms < GOAL_P99_MS,
        )
    });
    let bare_p99 = b.quantile_ms("lateness", 0.99);
    table.row("frame lateness p99", Unit::Millis, p99, bare_p99, goal);
    table.latency("frame lateness max", h, b, "lateness", 1.0);
    let burst = |r: &Report| r.quantile("burst", 1.0).map(f64::from);
    let goal = burst(h)
        .filter(|_| judged)
        .map(|n| Goal::new(format!("<={GOAL_BURST}"), n <= f64::from(GOAL_BURST)));
    table.row(
        "largest burst (frames)",
        Unit::Count,
        burst(h),
        burst(b),
        goal,
    );
    table.count("  streams with a larger burst", h, b, "over_burst");
    Loaded::finish_table(herald, bare, table);
}
