//! `talk`: connected gadgets send turns at a fixed total rate (open loop: a turn is sent
//! on schedule whether or not the last one was answered) to the zero-delay echo agent:
//! typed messages, and every Nth an utterance (`audio.start`, half a second of audio
//! frames sent at once, `audio.end`). The bench times each turn from the moment its
//! last frame was written to the first frame of the answer (`turn.start`) and to the
//! reply itself; utterances are timed apart, since the server packs and stores them.
//!
//! Against the bare baseline, which answers every text frame, an utterance's turn is
//! answered by its second answer (the one to `audio.end`).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use herald_gadget_proto::device::{AudioEnd, AudioStart};
use herald_gadget_proto::{
    encode_frame, Channel, DeviceMessage, FrameHeader, Pong, ServerMessage, Text,
};
use tokio::time::sleep_until;
use tokio_tungstenite::tungstenite::Message;

use super::connect::{connect_all, SPEECH_RATE};
use super::speak::{FRAME, FRAME_BYTES};
use super::stats::{Goal, Report, Table, Unit};
use super::worker::{Control, Job, Ws};
use super::{Loaded, Run};

/// Time after the last turn is sent for the answers still on their way.
const GRACE: Duration = Duration::from_secs(5);
/// The latency goal, and the rate it holds at.
const GOAL_P99_MS: f64 = 1.0;
const GOAL_RATE: f64 = 1000.0;
/// Frames of one utterance: 520 ms, over the server's 250 ms minimum.
pub(super) const UTTERANCE_FRAMES: u16 = 13;

/// A turn waiting for its answer.
pub(super) struct Pending {
    sent: Instant,
    answered: bool,
    voice: bool,
    /// Answers the bare baseline still owes (one per text frame sent).
    bare_answers: u8,
}

impl Pending {
    /// Where its measures go: typed turns and utterances apart.
    fn measure(&self, what: &'static str) -> &'static str {
        match (self.voice, what) {
            (false, _) => what,
            (true, "first") => "voice_first",
            (true, _) => "voice_reply",
        }
    }
}

/// One gadget's turns in flight, oldest first, and what they measured.
#[derive(Default)]
pub(super) struct Turns {
    pub pending: VecDeque<Pending>,
    pub report: Report,
}

impl Turns {
    pub fn sent(&mut self, voice: bool) {
        self.pending.push_back(Pending {
            sent: Instant::now(),
            answered: false,
            voice,
            bare_answers: if voice { 2 } else { 1 },
        });
        self.report
            .add(if voice { "utterances_sent" } else { "sent" }, 1);
    }

    fn ended(&mut self, turn: Pending) {
        self.report
            .add(if turn.voice { "utterances" } else { "turns" }, 1);
    }

    /// Account for a frame from the server; returns a `pong` to send, if any.
    pub fn on_text(&mut self, text: &str, bare: bool) -> Option<String> {
        if bare {
            // Any frame answers the oldest request.
            let done = self.pending.front_mut().is_some_and(|turn| {
                turn.bare_answers = turn.bare_answers.saturating_sub(1);
                turn.bare_answers == 0
            });
            if let Some(turn) = done.then(|| self.pending.pop_front()).flatten() {
                let took = turn.sent.elapsed();
                self.report.latency(turn.measure("first"), took);
                self.report.latency(turn.measure("reply"), took);
                self.ended(turn);
            }
            return None;
        }
        let report = &mut self.report;
        match ServerMessage::decode(text) {
            Ok(ServerMessage::TurnStart(_)) => {
                if let Some(turn) = self.pending.iter_mut().find(|t| !t.answered) {
                    turn.answered = true;
                    report.latency(turn.measure("first"), turn.sent.elapsed());
                }
            }
            Ok(ServerMessage::Reply(reply)) if !reply.interim => {
                if let Some(turn) = self.pending.front() {
                    report.latency(turn.measure("reply"), turn.sent.elapsed());
                }
            }
            Ok(ServerMessage::TurnEnd(_)) => {
                if let Some(turn) = self.pending.pop_front() {
                    self.ended(turn);
                }
            }
            // "Too many messages at once", "too short": that turn was refused.
            Ok(ServerMessage::Notice(notice)) => {
                if let Some(index) = self.pending.iter().position(|t| !t.answered) {
                    self.pending.remove(index);
                }
                report.add("refused", 1);
                report.error(notice.text);
            }
            Ok(ServerMessage::Ping(ping)) => {
                return Some(DeviceMessage::Pong(Pong { ts: ping.ts }).encode());
            }
            Ok(ServerMessage::Error(e)) => report.error(format!("error {}", e.code.as_str())),
            _ => {}
        }
        None
    }
}

/// Turn `n`: a typed message, or an utterance on `stream`.
pub(super) async fn send_turn(ws: &mut Ws, n: u64, stream: Option<u8>) -> Result<(), String> {
    let id = format!("t{n}");
    let Some(stream) = stream else {
        let text = DeviceMessage::Text(Text {
            id: Some(id),
            text: format!("turn {n}"),
        });
        return ws
            .send(Message::Text(text.encode().into()))
            .await
            .map_err(|e| e.to_string());
    };
    let start = DeviceMessage::AudioStart(AudioStart {
        id: Some(id.clone()),
        stream,
        rate: SPEECH_RATE,
        format: "pcm16".into(),
        mode: Some("hold".into()),
    });
    let silence = [0u8; FRAME_BYTES];
    let end = DeviceMessage::AudioEnd(AudioEnd {
        id: Some(id),
        stream,
        duration_ms: Some(u64::from(UTTERANCE_FRAMES) * FRAME.as_millis() as u64),
    });
    let mut frames = vec![Message::Text(start.encode().into())];
    frames.extend((0..UTTERANCE_FRAMES).map(|seq| {
        let header = FrameHeader {
            channel: Channel::Audio,
            stream,
            seq,
        };
        Message::Binary(encode_frame(header, &silence).into())
    }));
    frames.push(Message::Text(end.encode().into()));
    for frame in frames {
        ws.send(frame).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// One gadget's conversation until `end`, then until its last turn is answered.
async fn converse(
    mut ws: Ws,
    job: &Job,
    interval: Duration,
    first: Instant,
    end: Instant,
) -> Report {
    let mut turns = Turns::default();
    let mut next_send = first;
    let mut sent = 0u64;
    let give_up = sleep_until((end + GRACE).into());
    tokio::pin!(give_up);
    loop {
        let sending = next_send < end;
        if !sending && turns.pending.is_empty() {
            break;
        }
        let outcome = tokio::select! {
            _ = sleep_until(next_send.into()), if sending => {
                sent += 1;
                next_send += interval;
                let voice = sent.checked_rem(u64::from(job.media_every)) == Some(0);
                let stream = voice.then(|| u8::try_from(sent % 255 + 1).unwrap_or(1));
                let result = send_turn(&mut ws, sent, stream).await;
                if result.is_ok() {
                    turns.sent(voice);
                }
                result
            }
            _ = &mut give_up => break,
            next = ws.next() => match next {
                Some(Ok(Message::Text(text))) => match turns.on_text(&text, job.bare) {
                    Some(pong) => ws.send(Message::Text(pong.into())).await.map_err(|e| e.to_string()),
                    None => Ok(()),
                },
                Some(Ok(_)) => Ok(()),
                Some(Err(err)) => Err(err.to_string()),
                None => Err("connection closed".to_owned()),
            }
        };
        if let Err(err) = outcome {
            turns.report.error(err);
            break;
        }
    }
    let mut report = turns.report;
    report.add("unanswered", turns.pending.len() as u64);
    let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(None)).await;
    report
}

/// The worker's side: connect every gadget, then talk for the duration.
pub(super) async fn work(job: Job, mut control: Control) -> anyhow::Result<()> {
    let (_, open) = connect_all(&job, &mut control).await?;
    let clients = open.len().max(1);
    let interval = Duration::from_secs_f64(clients as f64 / job.rate.max(0.001));
    let start = Instant::now();
    let end = start + job.duration();
    // Spread the gadgets evenly over one interval, so the load is smooth from the start.
    let conversations = open.into_iter().enumerate().map(|(i, (_, ws))| {
        let first = start + interval.mul_f64(i as f64 / clients as f64);
        converse(ws, &job, interval, first, end)
    });
    let mut report = Report::default();
    for part in futures_util::future::join_all(conversations).await {
        report.merge(part);
    }
    report.elapsed_s = job.duration_s;
    control.report(report)?;
    Ok(())
}

pub(super) fn tabulate(run: &Run, herald: &Loaded, bare: &Loaded, table: &mut Table) {
    let (h, b) = Loaded::start_table("gadgets connected", "handshakes", herald, bare, table);
    let answered = |r: &Report| r.rate("turns") + r.rate("utterances");
    let rate = answered(h);
    table.row(
        &format!("turns answered (offered {:.0}/s)", run.rate),
        Unit::PerSecond,
        Some(rate),
        Some(answered(b)),
        (run.rate >= GOAL_RATE)
            .then(|| Goal::new(format!(">={GOAL_RATE:.0}/s"), rate >= 0.98 * GOAL_RATE)),
    );
    table.latency("typed: first answer frame p50", h, b, "first", 0.5);
    let (p99, bare_p99) = (h.quantile_ms("first", 0.99), b.quantile_ms("first", 0.99));
    let goal = p99.map(|ms| Goal::new(format!("<{GOAL_P99_MS:.0} ms"), ms < GOAL_P99_MS));
    table.row("  p99", Unit::Millis, p99, bare_p99, goal);
    let added = p99.zip(bare_p99).map(|(h, b)| h - b);
    table.row("  added over bare (p99)", Unit::Millis, added, None, None);
    table.latency("  reply p99", h, b, "reply", 0.99);
    table.count("utterances answered", h, b, "utterances");
    table.quantiles(["  first answer frame p50", "  p99"], h, b, "voice_first");
    let lost = |r: &Report| Some((r.count("unanswered") + r.count("refused")) as f64);
    table.row(
        "turns refused or unanswered",
        Unit::Count,
        lost(h),
        lost(b),
        None,
    );
    Loaded::finish_table(herald, bare, table);
}
