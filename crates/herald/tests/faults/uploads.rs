//! Uploads under kills, and their chunks out of order.

use std::path::PathBuf;
use std::time::Duration;

use herald_mobile_client::{media_frames, Event as PhoneEvent};
use herald_mobile_proto::{limits, MediaKind, ServerFrame};

use crate::rig::phone::{final_text, typing_on, Phone};
use crate::rig::seeds::{run_seeds, Rng};
use crate::rig::server::{final_checks, is_temporary, Herald};

struct Upload {
    id: String,
    caption: String,
    bytes: Vec<u8>,
    sent: bool,
    /// The typing indicator came on for it: the server took it (and saved it first).
    taken: bool,
    /// "Got your document" arrived.
    acked: bool,
}

impl Upload {
    fn answered(&self) -> bool {
        self.taken || self.acked
    }
}

/// A phone uploads files one after another, some in several chunks; the server is killed
/// at seeded moments. With the server dead, every upload it had taken must be in the
/// inbox, and every file there must be a whole upload; after the restart the phone sends
/// again what was not taken, and that must arrive too.
#[test]
fn uploads() {
    run_seeds("uploads", uploads_run);
}

/// Every file in the inbox is one of `uploads` whole, and every answered upload is there.
fn check_inbox(herald: &Herald, uploads: &[Upload]) {
    let inbox = herald.data().join("inbox");
    let files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&inbox)
        .map(|d| {
            d.map(|e| e.unwrap().path())
                .filter(|p| !is_temporary(p))
                .map(|p| {
                    let bytes = std::fs::read(&p).unwrap();
                    (p, bytes)
                })
                .collect()
        })
        .unwrap_or_default();
    for (path, bytes) in &files {
        assert!(
            uploads.iter().any(|u| u.bytes == *bytes),
            "{} ({} bytes) is no upload: a file cut short?",
            path.display(),
            bytes.len()
        );
    }
    for upload in uploads.iter().filter(|u| u.answered()) {
        assert!(
            files.iter().any(|(_, b)| *b == upload.bytes),
            "upload {} ({} bytes) was taken by the server, but is not in the inbox",
            upload.id,
            upload.bytes.len()
        );
    }
}

/// Send every part of `upload` (an unfinished series is dropped with its connection).
async fn send_upload(phone: &Phone, n: usize, upload: &mut Upload) {
    let frames = media_frames(
        &upload.id,
        MediaKind::Document,
        Some("application/octet-stream".into()),
        Some(format!("file{n}.bin")),
        Some(upload.caption.clone()),
        &upload.bytes,
    );
    for frame in frames {
        phone.client.send(frame).await.unwrap();
    }
    upload.sent = true;
}

/// Set the next kill of `plan` going once upload `sent` (or a later one) is sent.
fn arm(plan: &mut Vec<(usize, Duration)>, kill_at: &mut Option<tokio::time::Instant>, sent: usize) {
    if kill_at.is_none() && plan.first().is_some_and(|(n, _)| *n <= sent) {
        let (_, delay) = plan.remove(0);
        *kill_at = Some(tokio::time::Instant::now() + delay);
    }
}

async fn uploads_run(seed: u64) -> usize {
    let mut rng = Rng::new(seed);
    let mut herald = Herald::start(&[("MOBILE_ALLOW_ALL_USERS", "1")]);
    let token = herald.mobile_token();
    let mut phone = Phone::spawn(&herald, &token, &format!("uploads-{seed}"));
    let mut uploads: Vec<Upload> = (0..6)
        .map(|n| {
            let size = if rng.one_in(4) {
                limits::MEDIA_CHUNK_BYTES + rng.range(1, 400_000) as usize
            } else {
                rng.range(1, 300_000) as usize
            };
            Upload {
                id: format!("u{seed}-{n}"),
                caption: format!("upload {n} of {seed}"),
                bytes: rng.bytes(size),
                sent: false,
                taken: false,
                acked: false,
            }
        })
        .collect();
    // Kills a seeded while after an upload is sent: while the server decodes and writes
    // it, or answers it, or waits for the next.
    let mut plan: Vec<(usize, Duration)> = (0..rng.range(1, 4))
        .map(|_| {
            let scale = [5, 60, 400][rng.below(3) as usize];
            (
                rng.below(uploads.len() as u64) as usize,
                rng.millis(0, scale),
            )
        })
        .collect();
    plan.sort();
    let mut kill_at = None;
    let mut current = 0;
    let mut connected = false;
    while current < uploads.len() || kill_at.is_some() {
        let event = tokio::select! {
            _ = tokio::time::sleep_until(kill_at.unwrap_or_else(tokio::time::Instant::now)),
                if kill_at.is_some() => {
                kill_at = None;
                herald.kill();
                check_inbox(&herald, &uploads);
                herald.restart();
                continue;
            }
            event = phone.event() => event,
        };
        match &event {
            PhoneEvent::Connected { .. } => {
                connected = true;
                // Taken but not answered: its turn died with the server; it is in the
                // inbox (checked above), and sending it again would be a second message.
                while uploads.get(current).is_some_and(Upload::answered) {
                    current += 1;
                }
                if let Some(upload) = uploads.get_mut(current) {
                    send_upload(&phone, current, upload).await;
                    arm(&mut plan, &mut kill_at, current);
                }
            }
            PhoneEvent::Disconnected { .. } => connected = false,
            PhoneEvent::Denied { reason } | PhoneEvent::Failed { reason } => {
                panic!("the phone was refused: {reason}")
            }
            PhoneEvent::Frame(ServerFrame::Error { code, message }) => {
                panic!("upload refused: {code:?} {message}")
            }
            _ if typing_on(&event) => {
                if let Some(upload) = uploads.get_mut(current) {
                    upload.taken |= upload.sent;
                }
            }
            _ => {
                let Some(text) = final_text(&event) else {
                    continue;
                };
                let upload = uploads
                    .iter_mut()
                    .find(|u| text == format!("Got your document: {}.", u.caption));
                let Some(upload) = upload else {
                    panic!(
                        "an answer to no upload: {text:?} (a caption lost when the chunks \
                         came out of order after a reconnect? see \
                         upload_chunks_out_of_order_keep_their_caption)"
                    )
                };
                upload.acked = true;
                while uploads.get(current).is_some_and(Upload::answered) {
                    current += 1;
                }
                if let Some(upload) = uploads.get_mut(current) {
                    if connected && !upload.sent {
                        send_upload(&phone, current, upload).await;
                        arm(&mut plan, &mut kill_at, current);
                    }
                }
            }
        }
    }
    drop(phone);
    check_inbox(&herald, &uploads);
    let sizes: Vec<usize> = uploads.iter().map(|u| u.bytes.len()).collect();
    let acked = uploads.iter().filter(|u| u.acked).count();
    eprintln!("faults: uploads seed {seed}: sizes {sizes:?}, {acked} answered");
    final_checks(&herald);
    herald.kills
}

/// What the uploads scenario ran into: after a reconnect the client library sends first
/// the chunk that failed on the dead connection, then the app sends all of them again, so
/// a later chunk arrives before the first, which alone carries the caption. Chunks may
/// arrive in any order; the file's caption must not depend on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_chunks_out_of_order_keep_their_caption() {
    let herald = Herald::start(&[("MOBILE_ALLOW_ALL_USERS", "1")]);
    let mut phone = Phone::spawn(&herald, &herald.mobile_token(), "reordered");
    phone.connected().await;
    let bytes = Rng::new(7).bytes(limits::MEDIA_CHUNK_BYTES + 1000);
    let mut frames = media_frames(
        "two-parts",
        MediaKind::Document,
        Some("application/pdf".into()),
        Some("report.pdf".into()),
        Some("the report".into()),
        &bytes,
    );
    assert_eq!(frames.len(), 2);
    frames.reverse();
    for frame in frames {
        phone.client.send(frame).await.unwrap();
    }
    assert_eq!(phone.final_text().await, "Got your document: the report.");
}
