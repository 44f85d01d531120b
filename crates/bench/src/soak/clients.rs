//! The worker's side of a soak: its clients (idle gadgets, gadgets typing or speaking,
//! phones), each with one turn in flight at most, and the tally of what they saw.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::{SinkExt, StreamExt};
use herald_gadget_proto::ServerMessage;
use herald_mobile_proto::{ClientFrame, Text};
use tokio::sync::watch;
use tokio::time::sleep_until;
use tokio_tungstenite::tungstenite::Message;

use super::TURN_LIMIT;
use crate::connect::{handshake_all, hold, Device};
use crate::stats::Report;
use crate::talk::{send_turn, Turns, UTTERANCE_FRAMES};
use crate::worker::{Control, Failure, Job, Ws};
use crate::{mobile, random_hex};

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
pub(crate) async fn work(job: Job, mut control: Control) -> anyhow::Result<()> {
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
