//! `talk`: connected gadgets send typed turns at a fixed total rate (open loop: a turn
//! is sent on schedule whether or not the last one was answered) to the zero-delay
//! echo agent; the bench times each turn from the moment its frame was written to the
//! first frame of the answer (`turn.start`) and to the reply itself.
//!
//! Utterances are not part of the load yet: the server does not take gadget audio in
//! (it ignores `audio.start` and channel-1 frames), so there is nothing to measure.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use herald_gadget_proto::{DeviceMessage, Pong, ServerMessage, Text};
use tokio::time::sleep_until;
use tokio_tungstenite::tungstenite::Message;

use super::connect::{handshake_all, Device};
use super::stats::{Goal, Report, Table, Unit};
use super::worker::{Control, Job, Workers, Ws};
use super::{Run, Target, SETUP_LIMIT};

/// Time after the last turn is sent for the answers still on their way.
const GRACE: Duration = Duration::from_secs(5);
/// The latency goal, and the rate it holds at.
const GOAL_P99_MS: f64 = 1.0;
const GOAL_RATE: f64 = 1000.0;

/// A turn waiting for its answer.
struct Pending {
    sent: Instant,
    answered: bool,
}

/// One gadget's turns in flight, oldest first, and what they measured.
#[derive(Default)]
struct Turns {
    pending: VecDeque<Pending>,
    report: Report,
}

impl Turns {
    fn sent(&mut self) {
        self.pending.push_back(Pending {
            sent: Instant::now(),
            answered: false,
        });
        self.report.add("sent", 1);
    }

    /// Account for a frame from the server; returns a `pong` to send, if any.
    fn on_text(&mut self, text: &str, bare: bool) -> Option<String> {
        let report = &mut self.report;
        if bare {
            // Any frame answers the oldest turn.
            if let Some(turn) = self.pending.pop_front() {
                report.latency("first", turn.sent.elapsed());
                report.latency("reply", turn.sent.elapsed());
                report.add("turns", 1);
            }
            return None;
        }
        match ServerMessage::decode(text) {
            Ok(ServerMessage::TurnStart(_)) => {
                if let Some(turn) = self.pending.iter_mut().find(|t| !t.answered) {
                    turn.answered = true;
                    report.latency("first", turn.sent.elapsed());
                }
            }
            Ok(ServerMessage::Reply(reply)) if !reply.interim => {
                if let Some(turn) = self.pending.front() {
                    report.latency("reply", turn.sent.elapsed());
                }
            }
            Ok(ServerMessage::TurnEnd(_)) => {
                let ended = self.pending.pop_front();
                report.add("turns", u64::from(ended.is_some()));
            }
            // "Too many messages at once": that turn was refused.
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

/// One gadget's conversation until `end`, then until its last turn is answered.
async fn converse(
    mut ws: Ws,
    bare: bool,
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
                let text = DeviceMessage::Text(Text {
                    id: Some(format!("t{sent}")),
                    text: format!("turn {sent}"),
                })
                .encode();
                let result = ws.send(Message::Text(text.into())).await;
                if result.is_ok() {
                    turns.sent();
                }
                result.map_err(|e| e.to_string())
            }
            _ = &mut give_up => break,
            next = ws.next() => match next {
                Some(Ok(Message::Text(text))) => match turns.on_text(&text, bare) {
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
    let devices = Device::many(job.clients)?;
    control.go().await?;
    let (report, open) =
        handshake_all(&job, &devices, job.enroll_concurrency, true, "handshakes").await;
    control.report(report)?;

    control.go().await?;
    let clients = open.len().max(1);
    let interval = Duration::from_secs_f64(clients as f64 / job.rate.max(0.001));
    let start = Instant::now();
    let end = start + job.duration();
    // Spread the gadgets evenly over one interval, so the load is smooth from the start.
    let conversations = open.into_iter().enumerate().map(|(i, ws)| {
        let first = start + interval.mul_f64(i as f64 / clients as f64);
        converse(ws, job.bare, interval, first, end)
    });
    let mut report = Report::default();
    for part in futures_util::future::join_all(conversations).await {
        report.merge(part);
    }
    report.elapsed_s = job.duration_s;
    control.report(report)?;
    Ok(())
}

pub(super) struct Figures {
    setup: Report,
    load: Report,
    cpu: Option<f64>,
}

pub(super) fn measure(run: &Run, target: &Target) -> anyhow::Result<Figures> {
    let mut workers = Workers::spawn(run.jobs(target))?;
    let setup = workers.phase("connecting", SETUP_LIMIT)?;
    let cpu = target.cpu_seconds();
    let load = workers.phase("talking", run.duration + SETUP_LIMIT)?;
    let cpu = cpu
        .zip(target.cpu_seconds())
        .map(|(a, b)| (b - a) / load.elapsed_s.max(0.001) * 100.0);
    Ok(Figures { setup, load, cpu })
}

pub(super) fn tabulate(run: &Run, herald: &Figures, bare: &Figures, table: &mut Table) {
    let connected = |f: &Figures| Some(f.setup.count("handshakes") as f64);
    table.row(
        "gadgets connected",
        Unit::Count,
        connected(herald),
        connected(bare),
        None,
    );
    let (h, b) = (&herald.load, &bare.load);
    let rate = h.rate("turns");
    table.row(
        &format!("turns answered (offered {:.0}/s)", run.rate),
        Unit::PerSecond,
        Some(rate),
        Some(b.rate("turns")),
        (run.rate >= GOAL_RATE)
            .then(|| Goal::new(format!(">={GOAL_RATE:.0}/s"), rate >= 0.98 * GOAL_RATE)),
    );
    table.row(
        "first answer frame p50",
        Unit::Millis,
        h.quantile_ms("first", 0.5),
        b.quantile_ms("first", 0.5),
        None,
    );
    let p99 = h.quantile_ms("first", 0.99);
    table.row(
        "first answer frame p99",
        Unit::Millis,
        p99,
        b.quantile_ms("first", 0.99),
        p99.map(|ms| Goal::new(format!("<{GOAL_P99_MS:.0} ms"), ms < GOAL_P99_MS)),
    );
    let added = p99.zip(b.quantile_ms("first", 0.99)).map(|(h, b)| h - b);
    table.row("  added over bare (p99)", Unit::Millis, added, None, None);
    table.row(
        "reply p99",
        Unit::Millis,
        h.quantile_ms("reply", 0.99),
        b.quantile_ms("reply", 0.99),
        None,
    );
    let lost = |r: &Report| Some((r.count("unanswered") + r.count("refused")) as f64);
    table.row(
        "turns refused or unanswered",
        Unit::Count,
        lost(h),
        lost(b),
        None,
    );
    table.row("server CPU", Unit::Percent, herald.cpu, bare.cpu, None);
    for (name, f) in [("herald", herald), ("bare", bare)] {
        table.errors_of(name, &f.setup);
        table.errors_of(name, &f.load);
    }
}
