//! `mobile`: connected phones exchange messages with the echo agent as fast as it
//! answers (closed loop: each phone waits for its reply before sending again), and
//! every Nth message is a file uploaded in the protocol's chunks. Herald stores each
//! upload in its data directory and the agent answers it; the bench times a message
//! from its frame to the final reply frame, an upload from its last chunk.

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use herald_mobile_client::media_frames;
use herald_mobile_proto::{ClientFrame, DeviceInfo, Hello, MediaKind, ServerFrame, Text};
use tokio_tungstenite::tungstenite::Message;

use super::connect::GOAL_KIB_PER_CONN;
use super::stats::{Goal, Report, Table, Unit};
use super::worker::{open, Control, Failure, Job, Ws};
use super::Loaded;

/// A request unanswered for this long counts as timed out, and its phone stops.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// The id in the pre-encoded upload frames, replaced by each upload's own.
const UPLOAD_ID: &str = "upload-0000000000000000";

async fn hello(job: &Job, device_id: String, index: usize) -> Result<Ws, Failure> {
    let mut ws = tokio::time::timeout(ANSWER_TIMEOUT, open(&job.url, job.source(index), None))
        .await
        .map_err(|_| Failure::Timeout)??;
    let hello = ClientFrame::Hello(Hello {
        token: job.token_for(index),
        device: DeviceInfo {
            id: device_id,
            name: Some("bench".into()),
            platform: Some("bench".into()),
        },
    });
    ws.send(Message::Text(hello.encode().into())).await?;
    let text = answer(&mut ws).await?;
    if job.bare {
        return Ok(ws);
    }
    match ServerFrame::decode(&text) {
        Ok(ServerFrame::Ready { .. }) => Ok(ws),
        Ok(ServerFrame::Error { code, .. }) => Err(Failure::Refused(code.as_str().into())),
        _ => Err(Failure::Io("expected ready".into())),
    }
}

/// Connect `count` phones, one after the other, named after `tag`; counted in `report`
/// as connected or failed.
pub(super) async fn connect_phones(
    job: &Job,
    tag: &str,
    count: usize,
    report: &mut Report,
) -> Vec<Ws> {
    let mut phones = Vec::new();
    for index in 0..count {
        match hello(job, format!("bench-{tag}-{index}"), index).await {
            Ok(ws) => {
                report.add("connected", 1);
                phones.push(ws);
            }
            Err(failure) => {
                report.add("failed", 1);
                report.error(failure);
            }
        }
    }
    phones
}

/// The next text frame.
async fn answer(ws: &mut Ws) -> Result<String, Failure> {
    let wait = async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(text))) => return Ok(text.to_string()),
                Some(Ok(Message::Close(_))) | None => {
                    return Err(Failure::Io("connection closed".into()))
                }
                Some(Ok(_)) => {}
                Some(Err(err)) => return Err(err.into()),
            }
        }
    };
    tokio::time::timeout(ANSWER_TIMEOUT, wait)
        .await
        .map_err(|_| Failure::Timeout)?
}

/// Wait for the answer to `frames` requests: the final reply frame from Herald (other
/// frames of the turn are skipped), one frame per request from the baseline.
pub(super) async fn reply(ws: &mut Ws, bare: bool, frames: usize) -> Result<(), Failure> {
    let mut left = frames;
    loop {
        let text = answer(ws).await?;
        if bare {
            left -= 1;
            if left == 0 {
                return Ok(());
            }
            continue;
        }
        match ServerFrame::decode(&text) {
            Ok(ServerFrame::Message(m)) if m.final_ => return Ok(()),
            Ok(ServerFrame::Error { code, .. }) => {
                return Err(Failure::Refused(code.as_str().into()))
            }
            _ => {}
        }
    }
}

/// One phone's exchange until `end`.
async fn exchange(mut ws: Ws, job: &Job, upload: &[String], end: Instant) -> Report {
    let mut report = Report::default();
    let mut n = 0u32;
    while Instant::now() < end {
        n += 1;
        let id = format!("m{n}");
        let is_upload = n.checked_rem(job.media_every) == Some(0);
        let result = async {
            if is_upload {
                for frame in upload {
                    ws.send(Message::Text(frame.replacen(UPLOAD_ID, &id, 1).into()))
                        .await?;
                }
            } else {
                let text = ClientFrame::Text(Text {
                    id,
                    text: format!("message {n}"),
                    reply_to: None,
                });
                ws.send(Message::Text(text.encode().into())).await?;
            }
            let sent = Instant::now();
            reply(&mut ws, job.bare, if is_upload { upload.len() } else { 1 }).await?;
            Ok::<_, Failure>(sent.elapsed())
        }
        .await;
        match (result, is_upload) {
            (Ok(took), false) => {
                report.latency("message", took);
                report.add("messages", 1);
            }
            (Ok(took), true) => {
                report.latency("upload", took);
                report.add("uploads", 1);
                report.add("upload_bytes", job.media_bytes as u64);
            }
            (Err(failure), _) => {
                report.add(
                    if matches!(failure, Failure::Timeout) {
                        "timeouts"
                    } else {
                        "failed"
                    },
                    1,
                );
                report.error(failure);
                break;
            }
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(None)).await;
    report
}

/// The worker's side: connect every phone, then exchange for the duration.
pub(super) async fn work(job: Job, mut control: Control) -> anyhow::Result<()> {
    let mut tag = [0u8; 6];
    getrandom::fill(&mut tag).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
    let tag: String = tag.iter().map(|b| format!("{b:02x}")).collect();
    // Encoded once: base64 of a large file for every upload would load the client.
    let upload: Vec<String> = if job.media_every > 0 {
        let file = vec![0x5a; job.media_bytes];
        media_frames(
            UPLOAD_ID,
            MediaKind::Document,
            None,
            Some("bench.bin".into()),
            None,
            &file,
        )
        .iter()
        .map(ClientFrame::encode)
        .collect()
    } else {
        Vec::new()
    };

    control.go().await?;
    let started = Instant::now();
    let mut setup = Report::default();
    let phones = connect_phones(&job, &tag, job.clients, &mut setup).await;
    setup.elapsed_s = started.elapsed().as_secs_f64();
    control.report(setup)?;

    control.go().await?;
    let end = Instant::now() + job.duration();
    let exchanges = phones
        .into_iter()
        .map(|ws| exchange(ws, &job, &upload, end));
    let mut report = Report::default();
    for part in futures_util::future::join_all(exchanges).await {
        report.merge(part);
    }
    report.elapsed_s = job.duration_s;
    control.report(report)?;
    Ok(())
}

pub(super) fn tabulate(herald: &Loaded, bare: &Loaded, table: &mut Table) {
    let (h, b) = Loaded::start_table("phones connected", "connected", herald, bare, table);
    // As `connect` measures a gadget's, with the same goal: a phone costs no more.
    let idle = herald.idle_kib("connected");
    let goal = idle.map(|kib| {
        Goal::new(
            format!("<{GOAL_KIB_PER_CONN:.0} KiB"),
            kib < GOAL_KIB_PER_CONN,
        )
    });
    table.row(
        "  server memory per phone, connected and idle",
        Unit::KiB,
        idle,
        bare.idle_kib("connected"),
        goal,
    );
    let rate = |r: &Report| Some(r.rate("messages"));
    table.row("messages", Unit::PerSecond, rate(h), rate(b), None);
    table.quantiles(["  p50", "  p99"], h, b, "message");
    let mib_s = |r: &Report| Some(r.rate("upload_bytes") / (1024.0 * 1024.0));
    table.row(
        "media uploaded",
        Unit::MiBPerSecond,
        mib_s(h),
        mib_s(b),
        None,
    );
    table.count("  uploads", h, b, "uploads");
    table.latency("  p99", h, b, "upload", 0.99);
    let failed = |r: &Report| Some((r.count("timeouts") + r.count("failed")) as f64);
    table.row(
        "requests timed out or failed",
        Unit::Count,
        failed(h),
        failed(b),
        None,
    );
    Loaded::finish_table(herald, bare, table);
}
